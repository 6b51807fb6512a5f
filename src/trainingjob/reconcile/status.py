"""Phase, conditions and worker statuses as pure functions of what the pods show."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import job_selector
from trainingjob.api.replicas import Replica, desired_replicas, replica_order, role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.roles import OPTIONAL_ROLES, success_judge

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
    "resources",
)


@dataclass(frozen=True)
class Outcome:
    """The phase a job is in, and why (reason/message feed conditions and events)."""

    phase: str
    reason: str
    message: str


def worker_status(pod: PodView) -> dict[str, Any]:
    entry: dict[str, Any] = {"workerId": pod.index}
    if pod.role != k.WORKER:
        entry["role"] = pod.role
    entry |= {
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


def refused_worker_status(replica: Replica, pod_name: str, message: str) -> dict[str, Any]:
    """A pod admission refused to create: it has no pod, so no pod phase (NotCreated)."""
    return {
        "workerId": replica.index,
        **({"role": replica.role} if replica.role != k.WORKER else {}),
        "podName": pod_name,
        "phase": "NotCreated",
        "reason": "AdmissionDenied",
        "message": message[:1024],
    }


def failure_message(pod: PodView) -> str:
    detail = f"exit code {pod.exit_code}" if pod.exit_code is not None else "no exit code"
    reason = f" ({pod.reason})" if pod.reason else ""
    return f"{pod.role} {pod.index} (pod {pod.name}) failed with {detail}{reason}"


def _running_message(job: TrainingJob, running: int, required: list[Replica]) -> str:
    """ "3/4 workers running"; with other roles "4/5 pods running (1 chief, 1 ps, 3 workers)"."""
    if not job.spec.has_roles:
        return f"{running}/{len(required)} workers running"
    parts = ", ".join(
        f"{count} {role}{'s' * (count > 1 and role == k.WORKER)}" for role, count in role_counts(job.spec).items()
    )
    return f"{running}/{len(required)} pods running ({parts})"


def pods_outcome(
    job: TrainingJob, current: Mapping[Replica, PodView], restarting: bool, finished_ok: Collection[Replica] = ()
) -> Outcome:
    """Phase from the current pods (one per replica); `finished_ok` are pods whose failure is ignored."""
    spec = job.spec

    def phase_of(replica: Replica) -> str | None:
        if replica in finished_ok:
            return "Succeeded"
        pod = current.get(replica)
        return pod.phase if pod else None

    phases = {replica: phase_of(replica) for replica in desired_replicas(spec)}
    judge = success_judge(spec)
    if judge is not None and phases.get(judge[0]) == "Succeeded":
        return Outcome("Succeeded", judge[1], judge[2])
    workers = [r for r in phases if r.role == k.WORKER]
    if judge is None and all(phases[r] == "Succeeded" for r in workers):
        return Outcome("Succeeded", "AllWorkersSucceeded", f"all {len(workers)} workers succeeded")
    required = [r for r in phases if r.role not in OPTIONAL_ROLES]
    running = sum(phases[r] in ("Running", "Succeeded") for r in required)
    message = _running_message(job, running, required)
    if spec.elastic is not None:
        running_workers = sum(phases[r] in ("Running", "Succeeded") for r in workers)
        if running_workers >= spec.elastic.min_workers and phases.get(Replica(k.WORKER, 0)) == "Running":
            bounds = f"elastic: {spec.elastic.min_workers} to {spec.elastic.max_workers}"
            return Outcome("Running", "WorkersRunning", f"{running_workers}/{len(workers)} workers running ({bounds})")
    elif running == len(required):
        return Outcome("Running", "AllWorkersRunning", message)
    if restarting:
        return Outcome("Restarting", "Restarting", message)
    return Outcome("Pending", "WorkersPending", message)


def role_statuses(job: TrainingJob, current: Mapping[Replica, PodView]) -> dict[str, dict[str, int]]:
    """status.roleStatuses: per role, the pods wanted and how many are pending, running, succeeded, failed."""
    result = {}
    for role, count in role_counts(job.spec).items():
        phases = [pod.phase for replica, pod in current.items() if replica.role == role]
        result[role] = {
            "replicas": count,
            "pending": phases.count("Pending"),
            "running": phases.count("Running"),
            "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"),
        }
    return result


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
    current: Mapping[Replica, PodView],
    counters: Mapping[str, int],
    now: str,
    changes: Mapping[str, Any] | None = None,
    blocked: tuple[str, str] | None = None,
    refused: Mapping[Replica, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The whole status object; callers compare it with the stored one and write only on a difference.

    `blocked`: the Blocked condition's (reason, message) while something keeps the workers from running; without
    it a Blocked condition the job had turns False. `refused`: pods admission refused, by replica: (pod name,
    message)."""
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
        "workerStatuses": [
            entry
            for _, entry in sorted(
                [(pod.replica, worker_status(pod)) for pod in current.values()]
                + [(r, refused_worker_status(r, name, message)) for r, (name, message) in (refused or {}).items()],
                key=lambda item: replica_order(item[0]),
            )
        ],
        "observedGeneration": job.generation,
        # The scale subresource's selector: the workers (what spec.workers counts).
        "selector": job_selector(job.name) + (f",{k.LABEL_ROLE}={k.WORKER}" if job.spec.has_roles else ""),
        "workers": sum(1 for replica in current if replica.role == k.WORKER),
        **counters,
    }
    if job.spec.has_roles or job.spec.elastic is not None:
        status["roleStatuses"] = role_statuses(job, current)
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


# What only describes the workers in more detail: "3/8 workers running", each worker's phase and node, and what they
# hold (status.resources moves with every worker bound while a gang starts, like workerStatuses' nodeName).
DETAIL_FIELDS = frozenset({"message", "workerStatuses", "workers", "resources"})
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
