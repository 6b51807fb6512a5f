"""Request bodies from strangers, read and parsed within bounds: shared by the progress endpoint and the webhooks.

Every port the operator serves can be reached by pods, so a body is read only up to a limit (however many segments
it arrives in), and JSON is refused with a reason instead of an exception the server turns into a 500: invalid
UTF-8 or JSON, and nesting deeper than any Kubernetes object has (`[[[[...]]]]` 100,000 deep made json.loads raise
RecursionError, and a body just shallow enough for the parser still broke the recursive code that reads it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only a type here: the conversion worker process imports this module without aiohttp
    from aiohttp import web

# The deepest object the API server sends us (a TrainingJob with affinity terms, and its managedFields) nests
# about 20 levels; the API server's own decoder allows 10,000.
MAX_DEPTH = 100


class MalformedBody(ValueError):
    """A body that is no JSON document we can read; the message says why, for a 400 answer."""


class CallerGone(ConnectionError):
    """The connection ended before the body did (an API server killed while it sent a review): nobody is left to
    answer, so a server counts it and moves on instead of logging the reset as an error."""


def _connection_lost() -> tuple[type[BaseException], ...]:
    """What a body read raises when the caller's connection ends first."""
    from aiohttp import ClientPayloadError  # here: see the TYPE_CHECKING import above

    return (OSError, ClientPayloadError)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body up to `limit` bytes, however many segments it arrives in (a single read returns only the first)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while size < limit:
            chunk = await request.content.read(limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except _connection_lost() as error:
        raise CallerGone(f"the connection ended {size} bytes into the body ({type(error).__name__})") from None
    return b"".join(chunks)


async def read_whole_body(request: web.Request) -> bytes:
    """The whole body, within aiohttp's client_max_size (413 past it); CallerGone when the connection ends first."""
    try:
        return await request.read()
    except _connection_lost() as error:
        raise CallerGone(f"the connection ended before the body did ({type(error).__name__})") from None


def parse_json(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in `raw`; MalformedBody when it is not one, or nests deeper than `max_depth`."""
    try:
        document = json.loads(raw)
    except RecursionError:
        raise MalformedBody(f"body nests deeper than {max_depth} levels") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise MalformedBody(f"body is not valid JSON: {error}") from None
    if nesting_depth(document, max_depth) > max_depth:
        raise MalformedBody(f"body nests deeper than {max_depth} levels")
    return document


def nesting_depth(document: Any, stop_after: int) -> int:
    """How deep objects and lists nest in `document` (a scalar: 0), counted without recursion; counting stops
    once it passes `stop_after`."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > stop_after:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest
