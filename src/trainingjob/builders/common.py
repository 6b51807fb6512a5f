"""Metadata every child shares: our labels and the controller ownerReference that lets GC cascade."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.schema_spec import spec_schema
from trainingjob.api.types import TrainingJob
from trainingjob.api.versions import SHAPES

# Spec fields that only steer the operator's decisions; changing them must not restart running workers.
POLICY_FIELDS = frozenset(
    {
        "restartPolicy",
        "backoffLimit",
        "suspend",
        "activeDeadlineSeconds",
        "startupTimeoutSeconds",
        "ttlSecondsAfterFinished",
        "cleanPodPolicy",
        "successPolicy",
        "failurePolicy",
    }
)


def job_labels(job: TrainingJob) -> dict[str, str]:
    return {k.LABEL_JOB_NAME: job.name, k.LABEL_MANAGED_BY: k.MANAGED_BY}


def controller_reference(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    """The ownerReference that makes one of our resources the controller of a child (garbage collection, and
    deletion of the owner waits for the child)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owner_reference(job: TrainingJob) -> dict[str, Any]:
    return controller_reference(k.WATCHED_API_VERSION, k.KIND, job.name, job.uid)


def child_metadata(job: TrainingJob, name: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        # Ours last: a user's podLabels can never rewrite the labels our caches select on.
        "labels": {**(extra_labels or {}), **job_labels(job)},
        "ownerReferences": [owner_reference(job)],
    }


@functools.cache
def _spec_schema() -> dict[str, Any]:
    """The spec schema of the internal shape (api/types.py reads v1alpha1's names and defaults)."""
    return spec_schema(SHAPES[k.INTERNAL_VERSION])


def without_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """`value` as this operator's schema knows it: fields it does not declare dropped, fields equal to their default
    dropped (recursively), so a spec reads the same before and after the API server filled in defaults.

    Why: the API server defaults fields when it reads a stored object, so a CRD update (or operator upgrade) that
    adds a defaulted field changes every job's spec without any edit; hashing the spec as served would then
    restart every running job. Fields this operator does not know cannot shape the pods it builds.
    """
    if schema.get("x-kubernetes-preserve-unknown-fields") or not isinstance(value, dict | list):
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [without_defaults(item, items) for item in value] if isinstance(items, dict) else value
    properties = schema.get("properties")
    if properties is None:
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            return {key: without_defaults(item, values) for key, item in value.items()}
        return value
    result = {}
    for key, item in value.items():
        child = properties.get(key)
        if child is None:
            continue
        reduced = without_defaults(item, child)
        if "default" in child and reduced == without_defaults(child["default"], child):
            continue
        result[key] = reduced
    return result


def _shaping_fields(spec: Any) -> dict[str, Any]:
    """spec without the fields that do not shape the pods: the policy fields, each role's restartPolicy, and the
    worker count of an elastic job (scaled without restarting anyone)."""
    relevant = {key: value for key, value in spec.items() if key not in POLICY_FIELDS}
    if isinstance(relevant.get("elastic"), dict):
        relevant.pop("workers", None)
    roles = relevant.get("roles")
    if isinstance(roles, dict):
        relevant["roles"] = {
            role: {key: value for key, value in entry.items() if key != "restartPolicy"}
            if isinstance(entry, dict)
            else entry
            for role, entry in roles.items()
        }
    return relevant


def spec_hash(job: TrainingJob) -> str:
    """Fingerprint of everything in spec that shapes the workers, as this operator's schema reads it (defaults and
    unknown fields left out, see without_defaults); a different fingerprint after a spec edit (a new
    metadata.generation) means a coordinated restart."""
    relevant = _shaping_fields(job.raw_spec)
    canonical = json.dumps(
        without_defaults(relevant, _spec_schema()), sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
