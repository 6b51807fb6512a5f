"""Metadata every child shares: our labels and the controller ownerReference that lets GC cascade."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob

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


def owner_reference(job: TrainingJob) -> dict[str, Any]:
    return {
        "apiVersion": k.WATCHED_API_VERSION,
        "kind": k.KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def child_metadata(job: TrainingJob, name: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        # Ours last: a user's podLabels can never rewrite the labels our caches select on.
        "labels": {**(extra_labels or {}), **job_labels(job)},
        "ownerReferences": [owner_reference(job)],
    }


def spec_hash(job: TrainingJob) -> str:
    """Fingerprint of everything in spec that shapes the workers; a change means a coordinated restart."""
    relevant = {key: value for key, value in job.raw_spec.items() if key not in POLICY_FIELDS}
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
