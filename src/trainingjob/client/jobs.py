"""What the client hands back about a job: typed, read-only views of a TrainingJob body (the internal shape
api/conversion.py gives every version), the same for a job on a cluster and one run by the local backend.

The full body stays available as `Job.body` for anything these views do not name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.readouts import phase_shown, progress_percent
from trainingjob.api.status import Phase
from trainingjob.cli import render

FINISHED_PHASES: tuple[str, ...] = render.FINISHED_PHASES


@dataclass(frozen=True)
class Progress:
    """status.progress: what the chief reported (docs/progress-protocol.md), with the operator's percent and ETA."""

    percent: float | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    estimated_remaining_seconds: int | None = None
    last_update_time: str | None = None

    @classmethod
    def from_status(cls, progress: Mapping[str, Any] | None) -> Progress | None:
        if not progress:
            return None
        metrics = progress.get("metrics") or {}
        return cls(
            percent=progress_percent(dict(progress)),
            epoch=_int(progress.get("epoch")),
            total_epochs=_int(progress.get("totalEpochs")),
            step=_int(progress.get("step")),
            total_steps=_int(progress.get("totalSteps")),
            metrics={str(key): float(value) for key, value in metrics.items() if isinstance(value, int | float)},
            estimated_remaining_seconds=_int(progress.get("estimatedRemainingSeconds")),
            last_update_time=progress.get("lastUpdateTime"),
        )


@dataclass(frozen=True)
class Job:
    """One TrainingJob as last seen: identity, the few fields a notebook asks for, and the whole body."""

    name: str
    namespace: str
    phase: str
    workers: int
    progress: Progress | None
    message: str
    restart_count: int
    runtime: str | None
    body: Mapping[str, Any]

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    @property
    def succeeded(self) -> bool:
        return self.phase == Phase.SUCCEEDED

    @property
    def failure(self) -> str:
        """Why a Failed job failed (its Failed condition, else status.message); empty for other phases."""
        return render.failure_message(dict(self.body)) if self.phase == Phase.FAILED else ""

    @property
    def summary(self) -> str:
        """One line, as `tj watch` shows it: phase, running workers, percent, epoch or step, metrics, ETA."""
        return render.progress_view(dict(self.body)).summary

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Job:
        metadata, spec, status = body.get("metadata") or {}, body.get("spec") or {}, body.get("status") or {}
        runtime = (status.get("runtime") or {}).get("name") or (spec.get("runtimeRef") or {}).get("name")
        return cls(
            name=metadata.get("name", ""),
            namespace=metadata.get("namespace", ""),
            phase=phase_shown(body),
            workers=int(spec.get("workers", 1)),
            progress=Progress.from_status(status.get("progress")),
            message=str(status.get("message") or ""),
            restart_count=int(status.get("restartCount", 0)),
            runtime=runtime,
            body=body,
        )


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
