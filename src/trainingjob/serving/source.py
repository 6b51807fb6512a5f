"""Where an LLMModel's weights come from (spec.source): a claim, checkpoints in S3, or a TrainingJob's checkpoints (on
its volume or in S3) once it has Succeeded; and what the model's status and Events say about it. Pure.

Its own module because both the planner (which children to create) and the conditions (Progressing, Degraded) read
the resolved source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainingjob.api.status import Phase
from trainingjob.planning.actions import Event
from trainingjob.serving.observed import ObservedServing
from trainingjob.serving.types import LLMModel, ModelStore


@dataclass(frozen=True)
class SourceState:
    """Where the model is, or why there is nothing to serve yet."""

    claim_name: str | None
    ready: bool
    waiting: str | None = None  # Progressing: e.g. the TrainingJob still runs
    store: ModelStore | None = None  # the model is in S3 instead of on a claim
    failed: tuple[str, str] | None = None  # Degraded: (reason, message)
    job_phase: Phase | None = None
    run_dir: str | None = None  # a TrainingJob's own checkpoint directory in the claim, served unless path says


def resolve_source(model: LLMModel, observed: ObservedServing) -> SourceState:
    source = model.spec.source
    if source is None:
        return SourceState(claim_name=None, ready=True)
    if source.claim_name:
        return SourceState(claim_name=source.claim_name, ready=True)
    if source.uri:
        return SourceState(claim_name=None, ready=True, store=ModelStore(source.uri, source.secret_name))
    job, name = observed.job, source.training_job
    if job is None:
        return SourceState(None, False, waiting=f"waiting for TrainingJob {name}, which does not exist (yet)")
    if job.phase is Phase.FAILED:
        return SourceState(None, False, failed=("TrainingFailed", f"TrainingJob {name} failed"), job_phase=job.phase)
    if job.claim_name is None and job.store is None:
        message = f"TrainingJob {name} keeps no checkpoints on a volume or in S3 (spec.checkpoint.storage pvc or s3)"
        return SourceState(None, False, failed=("NoCheckpointVolume", message), job_phase=job.phase)
    if job.phase is not Phase.SUCCEEDED:
        waiting = f"waiting for TrainingJob {name} to succeed (phase {job.phase})"
        return SourceState(None, False, waiting=waiting, job_phase=job.phase)
    run_dir = None if job.store is not None else job.run_dir or None
    return SourceState(claim_name=job.claim_name, ready=True, job_phase=job.phase, store=job.store, run_dir=run_dir)


def source_events(model: LLMModel, source: SourceState) -> list[Event]:
    """An Event when the source job's phase reaches a verdict the model has not reported yet."""
    if model.spec.source is None or model.spec.source.training_job is None:
        return []
    before = (model.status.get("source") or {}).get("jobPhase")
    if source.job_phase == before:
        return []
    name = model.spec.source.training_job
    if source.job_phase is Phase.SUCCEEDED:
        return [Event("Normal", "SourceReady", f"TrainingJob {name} succeeded; serving its final checkpoint")]
    if source.job_phase is Phase.FAILED:
        return [Event("Warning", "TrainingFailed", f"TrainingJob {name} failed; nothing to serve")]
    return []


def source_status(model: LLMModel, source: SourceState) -> dict[str, Any] | None:
    spec = model.spec.source
    if spec is None:
        return None
    status: dict[str, Any] = {}
    if spec.training_job:
        status["trainingJob"] = spec.training_job
        status["jobPhase"] = str(source.job_phase or "Unknown")
    if source.claim_name:
        status["claimName"] = source.claim_name
    if source.store is not None:
        status["uri"] = source.store.uri
    if spec.path or source.run_dir:
        status["path"] = spec.path or source.run_dir
    return status
