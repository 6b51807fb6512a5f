"""A ConversionReview (apiextensions.k8s.io/v1) answered from its raw bytes to the response's bytes.

Pure and free of the server's imports, so that a big review (a list of thousands of jobs) is answered in a worker
process (webhooks/conversion_pool.py) while the operator's event loop keeps serving /healthz and admission: parsing
and converting a 16 MiB list took 1.7 s of one core, and the event loop stood still for all of it.

A body that is no ConversionReview (not JSON, nested absurdly deep, a request without a uid, objects that are not
a list of objects) raises MalformedBody, answered 400 with the reason; an object that cannot be converted fails the
review as a whole (200 with a Failure result naming it), which is what the API server expects.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.conversion import convert
from trainingjob.http_bodies import MalformedBody, parse_json


@dataclass(frozen=True)
class ConversionAnswer:
    """The response body, whether every object converted (else why not), and how many went from which version to
    which (API versions without the group) for the operator's metrics."""

    body: bytes
    converted: bool
    message: str | None = None
    counts: dict[tuple[str, str], int] = field(default_factory=dict)


def answer_conversion(raw: bytes) -> ConversionAnswer:
    """The answer to the ConversionReview in `raw`; MalformedBody when it is none."""
    body = parse_json(raw)
    request = _request(body)
    answer = conversion_review(body)
    result = answer["response"]["result"]
    converted = result["status"] == "Success"
    try:
        encoded = json.dumps(answer, separators=(",", ":")).encode()
    except RecursionError:
        raise MalformedBody("an object nests too deeply to answer") from None
    counts = dict(conversions({"request": request})) if converted else {}
    return ConversionAnswer(encoded, converted, None if converted else result.get("message"), counts)


def _request(body: Any) -> dict[str, Any]:
    """The review's request, checked for the types the answer relies on."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        raise MalformedBody("not a ConversionReview: it needs a request object")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise MalformedBody("a ConversionReview request needs a uid (a string)")
    if not isinstance(request.get("desiredAPIVersion"), str):
        raise MalformedBody("a ConversionReview request needs desiredAPIVersion (a string)")
    objects = request.get("objects")
    if objects is not None and (not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects)):
        raise MalformedBody("a ConversionReview request's objects must be a list of objects")
    return request


def conversions(body: Any) -> Counter[tuple[str, str]]:
    """How many objects of a ConversionReview go from which version to which (API versions without the group)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        return Counter()
    desired = _version(request.get("desiredAPIVersion"))
    objects = request.get("objects") or []
    return Counter((_version(obj.get("apiVersion")), desired) for obj in objects if isinstance(obj, dict))


def _version(api_version: Any) -> str:
    return str(api_version or "").rpartition("/")[2] or "unknown"


def conversion_review(body: Any) -> dict[str, Any]:
    """The answer to a ConversionReview: every object converted, or a failure naming the one that could not be."""
    request = _request(body)
    desired = request["desiredAPIVersion"]
    response: dict[str, Any] = {"uid": request["uid"]}
    converted: list[dict[str, Any]] = []
    for obj in request.get("objects") or []:
        try:
            converted.append(convert(obj, desired, owned=True))  # parsed for this answer alone
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as error:
            message = f"cannot convert {_object_name(obj)} to {desired}: {error!r}"
            response.update(convertedObjects=[], result={"status": "Failure", "message": message[:1024]})
            break
    else:
        response.update(convertedObjects=converted, result={"status": "Success"})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _object_name(obj: Any) -> str:
    metadata = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
    if not isinstance(metadata, dict):
        return "an object"
    return "/".join(str(part)[:253] for part in (metadata.get("namespace"), metadata.get("name")) if part) or (
        "an object"
    )
