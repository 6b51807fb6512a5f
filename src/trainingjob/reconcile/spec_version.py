"""Which spec the current workers were built from: a spec change is judged by metadata.generation, not by hashing
the spec as the API server serves it.

Why: the served spec changes without anyone editing it (a CRD update adds a defaulted field, an operator upgrade
fingerprints differently), and a fingerprint compared on every reconcile would gang-restart every running job
then. metadata.generation moves only when a user edits the spec, so:
- same generation as the one the workers were built for: they are current, whatever a fingerprint says now;
- a new generation: the fingerprint of the new spec (defaults and unknown fields left out) is compared with the
  fingerprint of the spec the workers were built for, so an edit of policy fields alone restarts nothing.

`status.workerSpec` records {generation, podSpecHash: the ml.example.com/spec-hash label of the current
workers, specHash: this operator's fingerprint of that generation's spec}. specHash is refreshed while the
generation holds, so a fingerprint that changed with an upgrade is rebased before the next edit is judged.
"""

from __future__ import annotations

from collections.abc import Iterable

from trainingjob.api.status import WorkerSpec
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import spec_hash
from trainingjob.reconcile.observed import PodView


def adopted_worker_spec(job: TrainingJob, live: Iterable[PodView], fingerprint: str) -> WorkerSpec:
    """A job whose status has no record yet (written by an operator before this one): if the spec was not edited
    since the status was last written, its live workers are current, whatever their label says."""
    labels = [p.spec_hash for p in live if p.spec_hash]
    unedited = job.status.observed_generation == job.generation
    if not unedited or not labels or fingerprint in labels:
        return WorkerSpec(job.generation, fingerprint, fingerprint)
    return WorkerSpec(job.generation, max(set(labels), key=labels.count), fingerprint)


def current_worker_spec(job: TrainingJob, live: Iterable[PodView]) -> WorkerSpec:
    """The spec the job's workers must be built from now, and the label that marks pods built from it."""
    fingerprint = spec_hash(job)
    recorded = job.status.worker_spec
    if recorded is None:
        return adopted_worker_spec(job, live, fingerprint)
    if job.generation == recorded.generation or fingerprint == recorded.spec_hash:
        # Not edited, or edited in fields that do not shape the workers: the current workers stay current.
        return WorkerSpec(job.generation, recorded.pod_hash, fingerprint)
    return WorkerSpec(job.generation, fingerprint, fingerprint)
