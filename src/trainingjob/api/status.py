"""A typed view of TrainingJob.status: the phase an enum, the counters and the gang record typed, the times
datetimes. Converted from the stored shape where a job is read (TrainingJob.from_body) and back where it is written,
as the spec is, so the planner never reads a status key or compares a phase string.

What only describes (conditions, worker and role statuses, progress, the last failure and checkpoint, tracking)
stays in the stored shape: the planner builds those entries whole and compares them whole.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainingjob.api.times import format_time, parse_time


class Phase(StrEnum):
    """status.phase: a summary of the conditions."""

    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    QUEUED = "Queued"  # labelled for a Kueue LocalQueue and not admitted (or evicted): no workers

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: the job ignores spec changes and only cleans up."""
        return self in (Phase.SUCCEEDED, Phase.FAILED)

    @property
    def waiting(self) -> bool:
        """Pending or Restarting: workers are yet to run."""
        return self in (Phase.PENDING, Phase.RESTARTING)


def phase_of(value: Any) -> Phase | None:
    """The phase a stored value names; None for none (or one this operator does not know)."""
    return next((phase for phase in Phase if phase.value == value), None)


def job_phase(job: Mapping[str, Any]) -> Phase | None:
    """The phase of a TrainingJob body in the internal shape, to judge it by (`tj`, the client, the queue view and
    the sweep planner: finished, failed, running), None while the operator has written none (or a value the CRD's
    enum would refuse). What is shown goes through api/readouts.py: phase_shown, which shows what was stored."""
    return phase_of((job.get("status") or {}).get("phase"))


@dataclass(frozen=True)
class Counters:
    """status.attempt, restartCount and disruptionCount; as a change, how much a plan moves them."""

    attempt: int = 0
    restart_count: int = 0
    disruption_count: int = 0

    def __add__(self, other: Counters) -> Counters:
        return Counters(
            self.attempt + other.attempt,
            self.restart_count + other.restart_count,
            self.disruption_count + other.disruption_count,
        )

    def to_dict(self) -> dict[str, int]:
        return {"attempt": self.attempt, "restartCount": self.restart_count, "disruptionCount": self.disruption_count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Counters:
        return cls(int(data.get("attempt", 0)), int(data.get("restartCount", 0)), int(data.get("disruptionCount", 0)))


@dataclass(frozen=True)
class GangRecord:
    """status.gang: the current gang, how many of its workers are placed, whether it is scheduled or why not.
    Without a gang object (gang scheduling unavailable) only state, reason and message are known."""

    state: str
    reason: str
    message: str
    provider: str | None = None
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    min_count: int | None = None
    placed: int | None = None

    @property
    def scheduled(self) -> bool:
        return self.state == "Scheduled"

    def to_dict(self) -> dict[str, Any]:
        stored = {
            "provider": self.provider,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "minCount": self.min_count,
            "placed": self.placed,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
        }
        return {key: value for key, value in stored.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GangRecord | None:
        if not data:
            return None
        return cls(
            state=str(data.get("state") or ""),
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            provider=data.get("provider"),
            api_version=data.get("apiVersion"),
            kind=data.get("kind"),
            name=data.get("name"),
            min_count=None if data.get("minCount") is None else int(data["minCount"]),
            placed=None if data.get("placed") is None else int(data["placed"]),
        )


@dataclass(frozen=True)
class WorkerSpec:
    """status.workerSpec: the spec generation the current workers were built from (reconcile/spec_version.py)."""

    generation: int
    pod_hash: str
    spec_hash: str

    @classmethod
    def from_dict(cls, value: Mapping[str, Any] | None) -> WorkerSpec | None:
        if not value or "generation" not in value or not value.get("podSpecHash"):
            return None
        return cls(int(value["generation"]), str(value["podSpecHash"]), str(value.get("specHash") or ""))

    def to_dict(self) -> dict[str, Any]:
        return {"generation": self.generation, "podSpecHash": self.pod_hash, "specHash": self.spec_hash}


Record = Mapping[str, Any]
# Stored keys of the fields kept in the stored shape, by field name.
AS_STORED = {
    "message": "message",
    "selector": "selector",
    "observed_generation": "observedGeneration",
    "workers": "workers",
    "suspended_seconds": "suspendedSeconds",
    "role_statuses": "roleStatuses",
    "last_failure": "lastFailure",
    "last_checkpoint": "lastCheckpoint",
    "last_stop": "lastStop",
    "progress": "progress",
    "simulated": "simulated",
    "tracking": "tracking",
    "resources": "resources",
    "runtime": "runtime",
    "queue": "queue",
}
TIMES = {
    "start_time": "startTime",
    "completion_time": "completionTime",
    "attempt_start_time": "attemptStartTime",
    "next_restart_time": "nextRestartTime",
    "suspend_time": "suspendTime",
}
LISTS = {"conditions": "conditions", "worker_statuses": "workerStatuses", "replaced_pods": "replacedPods"}


@dataclass(frozen=True)
class JobStatus:
    """TrainingJob.status. None is a field the status does not have (and a change to None removes it)."""

    phase: Phase | None = None
    message: str | None = None
    conditions: tuple[Record, ...] | None = None
    start_time: datetime.datetime | None = None
    completion_time: datetime.datetime | None = None
    worker_statuses: tuple[Record, ...] | None = None
    role_statuses: Record | None = None
    selector: str | None = None
    observed_generation: int | None = None
    workers: int | None = None
    counters: Counters | None = None
    attempt_start_time: datetime.datetime | None = None
    next_restart_time: datetime.datetime | None = None
    worker_spec: WorkerSpec | None = None
    last_failure: Record | None = None
    replaced_pods: tuple[str, ...] | None = None
    suspend_time: datetime.datetime | None = None
    suspended_seconds: int | None = None
    last_checkpoint: Record | None = None
    last_stop: Record | None = None  # reconcile/stops.py
    progress: Record | None = None
    simulated: bool | None = None  # once a worker ran on a simulated (kwok) node
    gang: GangRecord | None = None
    tracking: Record | None = None
    resources: Record | None = None
    # The runtime the job started from (api/runtimes.py's RuntimeSnapshot as stored).
    runtime: Record | None = None
    queue: Record | None = None  # where the job waits or runs in Kueue (queueing/planner.py: queue_status)

    def __post_init__(self) -> None:
        for name in TIMES:  # as written: what was planned compares equal to what is read back
            moment = getattr(self, name)
            if moment is not None and (moment.microsecond or moment.tzinfo is not datetime.UTC):
                object.__setattr__(self, name, moment.astimezone(datetime.UTC).replace(microsecond=0))

    @property
    def finished(self) -> bool:
        return self.phase is not None and self.phase.finished

    @property
    def moved(self) -> Counters:
        """The counters, 0 where the status has none yet."""
        return self.counters or Counters()

    def condition(self, condition_type: str) -> Record | None:
        return next((c for c in self.conditions or () if c.get("type") == condition_type), None)

    def replace(self, **fields: Any) -> JobStatus:
        return dataclasses.replace(self, **fields)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobStatus:
        """From the stored shape (internal version, api/conversion.py)."""
        counted = any(key in data for key in ("attempt", "restartCount", "disruptionCount"))
        return cls(
            phase=phase_of(data.get("phase")),
            counters=Counters.from_dict(data) if counted else None,
            worker_spec=WorkerSpec.from_dict(data.get("workerSpec")),
            gang=GangRecord.from_dict(data.get("gang")),
            **{name: parse_time(data.get(key)) for name, key in TIMES.items()},
            **{name: None if data.get(key) is None else tuple(data[key]) for name, key in LISTS.items()},
            **{name: data.get(key) for name, key in AS_STORED.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The stored shape: fields that are None are left out."""
        stored: dict[str, Any] = {
            "phase": None if self.phase is None else str(self.phase),
            **{key: None if getattr(self, name) is None else list(getattr(self, name)) for name, key in LISTS.items()},
            **{key: getattr(self, name) for name, key in AS_STORED.items()},
            **{key: _time_text(getattr(self, name)) for name, key in TIMES.items()},
            "workerSpec": None if self.worker_spec is None else self.worker_spec.to_dict(),
            "gang": None if self.gang is None else self.gang.to_dict(),
        }
        if self.counters is not None:
            stored.update(self.counters.to_dict())
        return {key: value for key, value in stored.items() if value is not None}


def _time_text(moment: datetime.datetime | None) -> str | None:
    return None if moment is None else format_time(moment)
