"""Phase, conditions and worker statuses as pure functions of what the pods show."""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import job_selector
from trainingjob.api.replicas import Replica, desired_replicas, replica_order, role_counts
from trainingjob.api.status import Counters, GangRecord, JobStatus, Phase
from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.kube.phases import PodPhase
from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.roles import optional_roles, success_judge

# Status fields that persist from one write to the next unless a plan changes them (None removes one).
CARRIED_FIELDS = (
    "runtime",
    "start_time",
    "completion_time",
    "last_failure",
    "last_checkpoint",
    "last_stop",
    "simulated",
    "suspended_seconds",
    "suspend_time",
    "attempt_start_time",
    "next_restart_time",
    "progress",
    "replaced_pods",
    "worker_spec",
    "gang",
    "resources",
    "queue",
)


@dataclass(frozen=True)
class Outcome:
    """The phase a job is in, and why (reason/message feed conditions and events)."""

    phase: Phase
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


def failure_message(pod: PodView, why: str | None = None) -> str:
    """ "launcher 0 (pod x-launcher-0) failed with exit code 1 (Error)", and `why` after a colon when the framework
    could tell (failure_detail: e.g. which MPI rank)."""
    detail = f"exit code {pod.exit_code}" if pod.exit_code is not None else "no exit code"
    reason = f" ({pod.reason})" if pod.reason else ""
    return f"{pod.role} {pod.index} (pod {pod.name}) failed with {detail}{reason}" + (f": {why}" if why else "")


def _running_message(job: TrainingJob, running: int, required: list[Replica]) -> str:
    """ "3/4 workers running"; with other roles "4/5 pods running (1 chief, 1 ps, 3 workers)"."""
    if not job.spec.has_roles:
        return f"{running}/{len(required)} workers running"
    parts = ", ".join(
        f"{count} {role}{'s' * (count > 1 and role == k.WORKER)}" for role, count in role_counts(job.spec).items()
    )
    return f"{running}/{len(required)} pods running ({parts})"


# Pods that have started their work, counted as running towards the job's phase.
STARTED = frozenset({PodPhase.RUNNING, PodPhase.SUCCEEDED})


def pods_outcome(
    job: TrainingJob, current: Mapping[Replica, PodView], restarting: bool, finished_ok: Collection[Replica] = ()
) -> Outcome:
    """Phase from the current pods (one per replica); `finished_ok` are pods whose failure is ignored."""
    spec = job.spec

    def phase_of(replica: Replica) -> str | None:
        if replica in finished_ok:
            return PodPhase.SUCCEEDED
        pod = current.get(replica)
        return pod.phase if pod else None

    phases = {replica: phase_of(replica) for replica in desired_replicas(spec)}
    judge = success_judge(spec)
    if judge is not None and phases.get(judge[0]) == PodPhase.SUCCEEDED:
        return Outcome(Phase.SUCCEEDED, judge[1], judge[2])
    workers = [r for r in phases if r.role == k.WORKER]
    if judge is None and all(phases[r] == PodPhase.SUCCEEDED for r in workers):
        return Outcome(Phase.SUCCEEDED, "AllWorkersSucceeded", f"all {len(workers)} workers succeeded")
    optional = optional_roles(spec)
    required = [r for r in phases if r.role not in optional]
    running = sum(phases[r] in STARTED for r in required)
    message = _running_message(job, running, required)
    if spec.elastic is not None:
        running_workers = sum(phases[r] in STARTED for r in workers)
        if running_workers >= spec.elastic.min_workers and phases.get(Replica(k.WORKER, 0)) == PodPhase.RUNNING:
            bounds = f"elastic: {spec.elastic.min_workers} to {spec.elastic.max_workers}"
            return Outcome(
                Phase.RUNNING, "WorkersRunning", f"{running_workers}/{len(workers)} workers running ({bounds})"
            )
    elif running == len(required):
        return Outcome(Phase.RUNNING, "AllWorkersRunning", message)
    if restarting:
        return Outcome(Phase.RESTARTING, "Restarting", message)
    return Outcome(Phase.PENDING, "WorkersPending", message)


def role_statuses(job: TrainingJob, current: Mapping[Replica, PodView]) -> dict[str, dict[str, int]]:
    """status.roleStatuses: per role, the pods wanted and how many are pending, running, succeeded, failed."""
    result = {}
    for role, count in role_counts(job.spec).items():
        phases = [pod.phase for replica, pod in current.items() if replica.role == role]
        result[role] = {
            "replicas": count,
            "pending": phases.count(PodPhase.PENDING),
            "running": phases.count(PodPhase.RUNNING),
            "succeeded": phases.count(PodPhase.SUCCEEDED),
            "failed": phases.count(PodPhase.FAILED),
        }
    return result


def desired_conditions(
    outcome: Outcome,
    ever_restarted: bool,
    ever_suspended: bool,
    blocked: tuple[str, str] | None = None,
    gang: GangRecord | None = None,
    gang_released: bool = False,
    ever_queued: bool = False,
) -> list[DesiredCondition]:
    """`blocked` is the Blocked condition's (reason, message) while something keeps the workers from running; ""
    as reason adds Blocked=False (it was True before); None leaves it out. `gang` is status.gang; `gang_released`
    a job whose gang was released (GangScheduled turns False)."""
    phase = outcome.phase
    conditions = [DesiredCondition("Running", phase is Phase.RUNNING, outcome.reason, outcome.message)]
    if ever_queued or phase is Phase.QUEUED:
        conditions.append(DesiredCondition("Queued", phase is Phase.QUEUED, outcome.reason, outcome.message))
    if gang is not None:
        conditions.append(
            DesiredCondition("GangScheduled", gang.scheduled, gang.reason or outcome.reason, gang.message)
        )
    elif gang_released:
        conditions.append(DesiredCondition("GangScheduled", False, outcome.reason, outcome.message or ""))
    if ever_restarted or phase is Phase.RESTARTING:
        conditions.append(DesiredCondition("Restarting", phase is Phase.RESTARTING, outcome.reason, outcome.message))
    if ever_suspended or phase is Phase.SUSPENDED:
        conditions.append(DesiredCondition("Suspended", phase is Phase.SUSPENDED, outcome.reason, outcome.message))
    if blocked is not None:
        is_blocked = bool(blocked[0])
        reason, message = blocked if is_blocked else (outcome.reason, outcome.message)
        conditions.append(DesiredCondition("Blocked", is_blocked, reason, message))
    if phase is Phase.SUCCEEDED:
        conditions.append(DesiredCondition("Succeeded", True, outcome.reason, outcome.message))
    if phase is Phase.FAILED:
        conditions.append(DesiredCondition("Failed", True, outcome.reason, outcome.message))
    return conditions


def build_status(
    job: TrainingJob,
    outcome: Outcome,
    current: Mapping[Replica, PodView],
    counters: Counters,
    now: datetime.datetime,
    changes: Mapping[str, Any] | None = None,
    blocked: tuple[str, str] | None = None,
    refused: Mapping[Replica, tuple[str, str]] | None = None,
) -> JobStatus:
    """The whole status; callers compare it with the stored one and write only on a difference. `changes` sets
    JobStatus fields (None removes one).

    `blocked`: the Blocked condition's (reason, message) while something keeps the workers from running; without
    it a Blocked condition the job had turns False. `refused`: pods admission refused, by replica: (pod name,
    message)."""
    previous = job.status
    changes = changes or {}
    if blocked is None and previous.condition("Blocked") is not None:
        blocked = ("", "")
    gang = changes.get("gang", previous.gang)
    desired = desired_conditions(
        outcome,
        counters.attempt > 0,
        previous.condition("Suspended") is not None,
        blocked,
        gang,
        gang_released=gang is None and previous.condition("GangScheduled") is not None,
        ever_queued=previous.condition("Queued") is not None,
    )
    carried = {name: getattr(previous, name) for name in CARRIED_FIELDS}
    if outcome.phase is Phase.RUNNING and carried["start_time"] is None:
        carried["start_time"] = now
    carried.update(changes)
    if any(pod.simulated for pod in current.values()):
        carried["simulated"] = True  # and stays: the job's results are a simulation's
    if outcome.phase.finished:
        carried["completion_time"] = carried["completion_time"] or now
        carried["next_restart_time"] = None
        carried["replaced_pods"] = None  # a finished job's cleanup deletes what is left (cleanPodPolicy)
    return JobStatus(
        phase=outcome.phase,
        message=outcome.message,
        conditions=tuple(merge_conditions(previous.conditions or (), desired, format_time(now), job.generation)),
        worker_statuses=tuple(
            entry
            for _, entry in sorted(
                [(pod.replica, worker_status(pod)) for pod in current.values()]
                + [(r, refused_worker_status(r, name, message)) for r, (name, message) in (refused or {}).items()],
                key=lambda item: replica_order(item[0]),
            )
        ),
        observed_generation=job.generation,
        # The scale subresource's selector: the workers (what spec.workers counts).
        selector=job_selector(job.name) + (f",{k.LABEL_ROLE}={k.WORKER}" if job.spec.has_roles else ""),
        workers=sum(1 for replica in current if replica.role == k.WORKER),
        counters=counters,
        role_statuses=role_statuses(job, current) if job.spec.has_roles or job.spec.elastic is not None else None,
        **carried,
    )


# What only describes the workers in more detail: "3/8 workers running", each worker's phase and node, and what they
# hold (status.resources moves with every worker bound while a gang starts, like workerStatuses' nodeName).
CONDITION_SUMMARY = ("type", "status", "reason", "observedGeneration")


def status_summary(status: JobStatus) -> JobStatus:
    """The status without its details: phase, conditions' type/status/reason, counters, times."""
    conditions = tuple({key: c.get(key) for key in CONDITION_SUMMARY} for c in status.conditions or ())
    return status.replace(message=None, worker_statuses=None, workers=None, resources=None, conditions=conditions)


def only_details_changed(old: JobStatus, new: JobStatus) -> bool:
    """True when a new status differs from the old one in worker details alone (never for a first status)."""
    return old != JobStatus() and old != new and status_summary(old) == status_summary(new)


# A status change in worker details alone waits this long for the next significant change to carry it.
DETAIL_WRITE_DELAY = 3.0
# While a gang starts (Pending, Restarting), longer: its pods go Running one by one over as long as binding, pulling
# and starting take (at 100 jobs x 8 on two cores, all pods created at 17.7 s and all Running at 32.1 s:
# docs/benchmarks.md, commit 1737cdf), and the phase change to Running carries them all.
STARTING_DETAIL_WRITE_DELAY = 10.0
STARTING_PHASES = (Phase.PENDING, Phase.RESTARTING)


def detail_write_delay(previous: JobStatus) -> float:
    """How long a change of worker details alone may wait for a significant change to carry it."""
    return STARTING_DETAIL_WRITE_DELAY if previous.phase in STARTING_PHASES else DETAIL_WRITE_DELAY


def hold_details(previous: JobStatus, status: JobStatus, held_for: float | None) -> tuple[JobStatus, float | None]:
    """The status to write, and in how many seconds to look again when a change of worker details alone is held
    back (it has been for `held_for` seconds, 0 when it would be news; None: nothing is held back).

    While a gang starts or finishes, its pods change one by one and each change would be a status write of its
    own; the phase change that follows carries them all in one write instead. A job whose details change alone
    (one worker of many restarted, a gang slow to start) gets them written once the delay is over.
    """
    if held_for is None or not only_details_changed(previous, status):
        return status, None
    wait = detail_write_delay(previous) - held_for
    return (status, None) if wait <= 0 else (previous, wait)
