"""Helpers for index functions (what a controller keeps of each watched object): trimmed bodies, labels, and the
label selector of the objects the operator manages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as k

# Children carry it: informers of children ask the API server for these only (a server-side label selector).
MANAGED = f"{k.LABEL_MANAGED_BY}={k.MANAGED_BY}"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def trimmed_body(body: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The object without managedFields and kubectl's last-applied copy of itself (often half its size); a list's
    items lack apiVersion and kind, which conversion reads, so they are filled in."""
    metadata = dict(body.get("metadata") or {})
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        metadata["annotations"] = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
    return {**body, "apiVersion": body.get("apiVersion") or api_version, "kind": kind, "metadata": metadata}


def labels(body: Mapping[str, Any]) -> Mapping[str, str]:
    return (body.get("metadata") or {}).get("labels") or {}
