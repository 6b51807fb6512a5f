"""AdmissionReview in and out (admission.k8s.io/v1): what a webhook decision looks like on the wire.

Decisions are Verdicts: allowed or not, a message a user reads after `admission webhook "..." denied the request:`,
warnings kubectl prints as `Warning: ...`, and for the mutating webhook a JSON patch.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

# The API server keeps at most this many characters of one warning; longer ones are cut, so keep them short.
MAX_WARNING = 256


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    operation: str  # CREATE | UPDATE
    namespace: str
    name: str
    object: dict[str, Any]
    old_object: dict[str, Any] | None
    dry_run: bool = False
    version: str = ""  # the API version the request was made in (matchPolicy Exact: the object's version)

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.object.get("spec") or {})

    @property
    def old_spec(self) -> dict[str, Any] | None:
        return None if self.old_object is None else dict(self.old_object.get("spec") or {})


@dataclass
class Verdict:
    allowed: bool = True
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)

    def deny(self, message: str) -> Verdict:
        """Deny with this reason; several reasons are joined, so a user fixes them all in one go."""
        self.allowed = False
        self.message = message if not self.message else f"{self.message}; {message}"
        return self

    def warn(self, message: str) -> Verdict:
        self.warnings.append(message[:MAX_WARNING])
        return self


def parse_review(body: Any) -> AdmissionRequest:
    """The request of an AdmissionReview; ValueError if the body is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
        raise ValueError("not an AdmissionReview")
    request = body["request"]
    obj = request.get("object")
    if not isinstance(obj, dict) or not request.get("uid"):
        raise ValueError("an AdmissionReview request needs a uid and an object")
    metadata = obj.get("metadata") or {}
    return AdmissionRequest(
        uid=request["uid"],
        operation=request.get("operation", ""),
        namespace=request.get("namespace") or metadata.get("namespace") or "",
        name=request.get("name") or metadata.get("name") or "",
        object=obj,
        old_object=request.get("oldObject") if isinstance(request.get("oldObject"), dict) else None,
        dry_run=bool(request.get("dryRun")),
        version=str((request.get("kind") or {}).get("version") or ""),
    )


def review_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": verdict.message or "denied"}
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    if verdict.patch and verdict.allowed:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(verdict.patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
