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
class UserInfo:
    """Who made the request, as the API server authenticated them: what a SubjectAccessReview asks about."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)


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
    kind: str = ""  # the object's kind (TrainingJob, TrainingSweep)
    user: UserInfo = field(default_factory=UserInfo)

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
    """The request of an AdmissionReview; ValueError, naming what is wrong, if the body is not one the checks can
    read (the API server always sends the types below; anyone else may send anything)."""
    if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
        raise ValueError("not an AdmissionReview: it needs a request object")
    request = body["request"]
    obj = request.get("object")
    if not isinstance(request.get("uid"), str) or not request["uid"] or not isinstance(obj, dict):
        raise ValueError("an AdmissionReview request needs a uid (a string) and an object")
    old = request.get("oldObject")
    metadata = _mapping(obj, "metadata", "object.metadata")
    _mapping(obj, "spec", "object.spec")
    if old is not None:
        _mapping(_checked(old, dict, "oldObject"), "spec", "oldObject.spec")
    kind = _mapping(request, "kind", "request.kind")
    return AdmissionRequest(
        uid=request["uid"],
        operation=_checked(request.get("operation") or "", str, "request.operation"),
        namespace=_checked(request.get("namespace") or metadata.get("namespace") or "", str, "request.namespace"),
        name=_checked(request.get("name") or metadata.get("name") or "", str, "request.name"),
        object=obj,
        old_object=old,
        dry_run=bool(request.get("dryRun")),
        version=str(kind.get("version") or ""),
        kind=str(kind.get("kind") or ""),
        user=user_info(request.get("userInfo")),
    )


def _checked(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{where} must be {'an object' if kind is dict else 'a string'}")
    return value


def _mapping(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """parent[key] as an object ({} when absent or null)."""
    value = parent.get(key)
    return {} if value is None else _checked(value, dict, where)


def user_info(value: Any) -> UserInfo:
    """The requesting user as the API server authenticated it (request.userInfo)."""
    if value is None:
        return UserInfo()
    info = _checked(value, dict, "request.userInfo")
    groups = info.get("groups") or []
    extra = info.get("extra") or {}
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ValueError("request.userInfo.groups must be a list of strings")
    if not isinstance(extra, dict) or not all(
        isinstance(v, list) and all(isinstance(item, str) for item in v) for v in extra.values()
    ):
        raise ValueError("request.userInfo.extra must map names to lists of strings")
    return UserInfo(
        username=_checked(info.get("username") or "", str, "request.userInfo.username"),
        uid=_checked(info.get("uid") or "", str, "request.userInfo.uid"),
        groups=tuple(groups),
        extra={key: tuple(values) for key, values in extra.items()},
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
