"""An object's identity as its metadata holds it, read in one place for every kind's typed view (api/types.py,
sweeps/types.py, serving/types.py), so each kind's `from_body` reads only its spec and status."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A DNS-1123 subdomain: what a namespace (a label, a subset), a TrainingJob, a sweep or a pod can be named (the
# CRD schemas use the same pattern and bound).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MAX_NAME_LENGTH = 253
OBJECT_NAME = re.compile(DNS_SUBDOMAIN)


def is_object_name(text: str) -> bool:
    """Whether `text` can name an object. Our servers check names taken from a URL path with it before using or
    logging them: a path segment arrives decoded, so it can hold "/", "..", newlines or 8 KiB of anything."""
    return len(text) <= MAX_NAME_LENGTH and OBJECT_NAME.fullmatch(text) is not None


@dataclass(frozen=True)
class ObjectMeta:
    namespace: str
    name: str
    uid: str
    generation: int
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None


def object_meta(body: Mapping[str, Any]) -> ObjectMeta:
    """The identity of `body`; absent fields read as empty (a manifest not yet created has no uid or generation)."""
    metadata = body.get("metadata") or {}
    return ObjectMeta(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 0),
        labels=dict(metadata.get("labels") or {}),
        annotations=dict(metadata.get("annotations") or {}),
        finalizers=tuple(metadata.get("finalizers") or ()),
        deletion_timestamp=metadata.get("deletionTimestamp"),
        creation_timestamp=metadata.get("creationTimestamp"),
    )
