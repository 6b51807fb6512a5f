"""The API server's own words: its Status body in a failed request, raised as the client raises it, and when an Event
happened; shared by the operator, the CLI and the UI."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException


def status_body(error: ApiException) -> dict[str, Any]:
    """The metav1.Status the API server answered with, or {} (no body, not JSON, not an object)."""
    body = error.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return {}
    try:
        document = json.loads(body)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def api_message(error: ApiException) -> str:
    """The API server's own explanation of `error` (its Status message), or the HTTP reason."""
    return status_body(error).get("message") or str(error.reason or "").strip() or f"HTTP {error.status}"


# Answers of an API server that is restarting, overloaded or without its storage (etcd down: 500 "etcdserver: request
# timed out", 504 "Timeout: request did not complete"), not of a request that is wrong.
UNAVAILABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def unavailable(error: BaseException) -> bool:
    """Whether `error` says the API server could not answer just now (refused or dropped connection, a timeout, one
    of UNAVAILABLE_STATUSES): expected while the control plane restarts, retried with backoff, and worth a warning
    line, not a traceback (the traceback would show our code, which did nothing wrong)."""
    if isinstance(error, ApiException):
        return error.status in UNAVAILABLE_STATUSES
    return isinstance(error, aiohttp.ClientError | TimeoutError | ConnectionError)


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    """Raise the ApiException the client raises itself for requests made with _preload_content=True."""
    if 200 <= response.status <= 299:
        return
    try:
        body = await response.read()
    finally:
        response.release()
    error = ApiException(status=response.status, reason=response.reason)
    error.body = body.decode("utf-8", "replace")
    raise error


def event_time(event: dict[str, Any]) -> str:
    return event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""
