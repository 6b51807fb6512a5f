"""`<job>-checkpoints`: the PVC the operator creates when checkpoint.storage asks for a size.

Without deleteOnCompletion it has no ownerReference, on purpose: checkpoints outlive the job so a new job of the
same name resumes from them, or a server can load them. With it, garbage collection removes it with the job.
"""

from __future__ import annotations

from typing import Any

from trainingjob.api.constants import LABEL_ROLE
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata


def checkpoint_claim_name(job: TrainingJob) -> str | None:
    """The PVC workers mount for checkpoints: an existing claim, ours, or none (checkpointing disabled, or an
    object store the training code writes to itself)."""
    checkpoint = job.spec.checkpoint
    if not checkpoint.enabled or checkpoint.storage is None or not checkpoint.storage.is_volume:
        return None
    return checkpoint.storage.claim_name or f"{job.name}-checkpoints"


def desired_checkpoint_pvc(job: TrainingJob) -> dict[str, Any] | None:
    storage = job.spec.checkpoint.storage
    if checkpoint_claim_name(job) is None or storage is None or storage.claim_name or not storage.size:
        return None
    metadata = child_metadata(job, f"{job.name}-checkpoints", {LABEL_ROLE: "checkpoints"})
    if not job.spec.checkpoint.delete_on_completion:
        del metadata["ownerReferences"]
    spec: dict[str, Any] = {
        "accessModes": list(storage.access_modes),
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class_name:
        spec["storageClassName"] = storage.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}
