"""Phase, conditions and worker statuses as pure functions of what the pods show."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api.names import job_selector
from trainingjob.api.types import TrainingJob
from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.reconcile.observed import PodView

TERMINAL_PHASES = ("Succeeded", "Failed")
# Status fields that persist from one write to the next unless a plan changes them (None removes one).
CARRIED_FIELDS = (
    "startTime",
    "completionTime",
    "lastFailure",
    "lastCheckpoint",
    "suspendedSeconds",
    "suspendTime",
    "attemptStartTime",
    "nextRestartTime",
    "progress",
    "replacedPods",
    "workerSpec",
    "gang",
)


@dataclass(frozen=True)
class Outcome:
    """The phase a job is in, and why (reason/message feed conditions and events)."""

    phase: str
    reason: str
    message: str


def worker_status(pod: PodView) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "workerId": pod.index,
        "podName": pod.name,
        "phase": pod.phase,
        "restartCount": pod.restart_count,
    }
    reason, message = pod.reason, pod.message
    if reason is None and pod.waiting_reason:
        reason, message = pod.waiting_reason, pod.waiting_message
    elif reason is None and pod.unschedulable_message:
        reason, message = "Unschedulable", pod.unschedulable_message
    optional = {
        "exitCode": pod.exit_code,
        "reason": reason,
        "message": message[:1024] if message else None,
        "nodeName": pod.node_name,
    }
    entry.update({key: value for key, value in optional.items() if value is not None})
    return entry


def refused_worker_status(index: int, pod_name: str, message: str) -> dict[str, Any]:
    """A worker whose pod admission refused to create: it has no pod, so no pod phase (NotCreated)."""
    return {
        "workerId": index,
        "podName": pod_name,
        "phase": "NotCreated",
        "reason": "AdmissionDenied",
        "message": message[:1024],
    }


def failure_message(pod: PodView) -> str:
    detail = f"exit code {pod.exit_code}" if pod.exit_code is not None else "no exit code"
    reason = f" ({pod.reason})" if pod.reason else ""
    return f"worker {pod.index} (pod {pod.name}) failed with {detail}{reason}"


def pods_outcome(
    job: TrainingJob, current: Mapping[int, PodView], restarting: bool, finished_ok: Collection[int] = ()
) -> Outcome:
    """Phase from the current pods (one per worker index); `finished_ok` are workers whose failure is ignored."""
    workers = job.spec.workers

    def phase_of(index: int) -> str | None:
        if index in finished_ok:
            return "Succeeded"
        pod = current.get(index)
        return pod.phase if pod else None

    phases = {i: phase_of(i) for i in range(workers)}
    if job.spec.success_policy == "Rank0" and phases.get(0) == "Succeeded":
        return Outcome("Succeeded", "Rank0Succeeded", "worker 0 succeeded (successPolicy Rank0)")
    if all(phase == "Succeeded" for phase in phases.values()):
        return Outcome("Succeeded", "AllWorkersSucceeded", f"all {workers} workers succeeded")
    running = sum(phase in ("Running", "Succeeded") for phase in phases.values())
    if running == workers:
        return Outcome("Running", "AllWorkersRunning", f"{workers}/{workers} workers running")
    message = f"{running}/{workers} workers running"
    if restarting:
        return Outcome("Restarting", "Restarting", message)
    return Outcome("Pending", "WorkersPending", message)


def desired_conditions(
    outcome: Outcome,
    ever_restarted: bool,
    ever_suspended: bool,
    blocked: tuple[str, str] | None = None,
    gang: Mapping[str, Any] | None = None,
) -> list[DesiredCondition]:
    """`blocked` is the Blocked condition's (reason, message) while something keeps the workers from running; ""
    as reason adds Blocked=False (it was True before); None leaves it out. `gang` is status.gang (reason "" for a
    job whose gang was released: GangScheduled turns False)."""
    phase = outcome.phase
    conditions = [DesiredCondition("Running", phase == "Running", outcome.reason, outcome.message)]
    if gang is not None:
        scheduled = gang.get("state") == "Scheduled"
        reason, message = (gang.get("reason"), gang.get("message")) if gang else (outcome.reason, outcome.message)
        conditions.append(DesiredCondition("GangScheduled", scheduled, reason or outcome.reason, message or ""))
    if ever_restarted or phase == "Restarting":
        conditions.append(DesiredCondition("Restarting", phase == "Restarting", outcome.reason, outcome.message))
    if ever_suspended or phase == "Suspended":
        conditions.append(DesiredCondition("Suspended", phase == "Suspended", outcome.reason, outcome.message))
    if blocked is not None:
        is_blocked = bool(blocked[0])
        reason, message = blocked if is_blocked else (outcome.reason, outcome.message)
        conditions.append(DesiredCondition("Blocked", is_blocked, reason, message))
    if phase == "Succeeded":
        conditions.append(DesiredCondition("Succeeded", True, outcome.reason, outcome.message))
    if phase == "Failed":
        conditions.append(DesiredCondition("Failed", True, outcome.reason, outcome.message))
    return conditions


def build_status(
    job: TrainingJob,
    outcome: Outcome,
    current: Mapping[int, PodView],
    counters: Mapping[str, int],
    now: str,
    changes: Mapping[str, Any] | None = None,
    blocked: tuple[str, str] | None = None,
    refused: Mapping[int, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The whole status object; callers compare it with the stored one and write only on a difference.

    `blocked`: the Blocked condition's (reason, message) while something keeps the workers from running; without
    it a Blocked condition the job had turns False. `refused`: workers whose pod admission refused, by index:
    (pod name, message)."""
    previous = job.status
    ever_suspended = any(c.get("type") == "Suspended" for c in previous.get("conditions") or [])
    if blocked is None and any(c.get("type") == "Blocked" for c in previous.get("conditions") or []):
        blocked = ("", "")
    gang = (changes or {})["gang"] if "gang" in (changes or {}) else previous.get("gang")
    if gang is None and any(c.get("type") == "GangScheduled" for c in previous.get("conditions") or []):
        gang = {}
    status: dict[str, Any] = {
        "phase": outcome.phase,
        "message": outcome.message,
        "conditions": merge_conditions(
            previous.get("conditions") or [],
            desired_conditions(outcome, counters.get("attempt", 0) > 0, ever_suspended, blocked, gang),
            now,
            job.generation,
        ),
        "workerStatuses": sorted(
            [worker_status(pod) for pod in current.values()]
            + [refused_worker_status(i, name, message) for i, (name, message) in (refused or {}).items()],
            key=lambda entry: entry["workerId"],
        ),
        "observedGeneration": job.generation,
        "selector": job_selector(job.name),
        "workers": len(current),
        **counters,
    }
    carried = {key: previous[key] for key in CARRIED_FIELDS if key in previous}
    if outcome.phase == "Running" and "startTime" not in carried:
        carried["startTime"] = now
    carried.update(changes or {})
    if outcome.phase in TERMINAL_PHASES:
        carried.setdefault("completionTime", now)
        carried.pop("nextRestartTime", None)
        carried.pop("replacedPods", None)  # a finished job's cleanup deletes what is left (cleanPodPolicy)
    status.update({key: value for key, value in carried.items() if value is not None})
    return status


# What only describes the workers in more detail: "3/8 workers running", each worker's phase and node.
DETAIL_FIELDS = frozenset({"message", "workerStatuses", "workers"})
CONDITION_SUMMARY = ("type", "status", "reason", "observedGeneration")


def status_summary(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status without its details: phase, conditions' type/status/reason, counters, times."""
    summary = {key: value for key, value in status.items() if key not in DETAIL_FIELDS}
    conditions = status.get("conditions") or []
    summary["conditions"] = [{key: c.get(key) for key in CONDITION_SUMMARY} for c in conditions]
    return summary


def only_details_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when a new status differs from the old one in worker details alone (never for a first status)."""
    return bool(old) and old != new and status_summary(old) == status_summary(new)
