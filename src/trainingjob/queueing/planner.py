"""The queue planner: (a job's queue inputs, its Workload, now) -> one QueueDecision.

Pure and level-triggered like the job planner: it reads what is (the job's labels, phase and the workers left, its
Workload as Kueue last wrote it) and answers what must be true, mirroring what Kueue's own job integrations do
(pkg/controller/jobframework/reconciler.go) for a controller outside Kueue:
- no Workload yet: create it (or, for a prebuilt one, wait for it); the job is held (Queued) until Kueue admits it;
- the pod sets changed (a spec change or a scale) or the queue did: replace the Workload, holding the workers;
- evicted (preempted, queue stopped, ...): hold, so the workers are stopped through the suspend path; once none
  runs, give the quota back (QuotaReserved=False, admission cleared, Requeued) so Kueue can queue it again;
- admitted: run, with the admitted flavors' placement and counts (an elastic job's workers may be admitted
  partially: fewer than spec.workers, at least elastic.minWorkers; admitted_workers says how many run);
- finished: mark the Workload Finished, so Kueue releases its quota at once.
`hold` says why no worker may run; the job planner turns it into phase Queued with that reason and message.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from trainingjob.api.constants import WORKER
from trainingjob.api.status import Phase
from trainingjob.api.times import format_time, parse_time
from trainingjob.builders.pod import QueuePlacement
from trainingjob.queueing.admission import FlavorView, WorkloadView, placement

REQUEUED_AFTER = ("Preempted", "NodeFailures")  # evictions after which Kueue expects Requeued=True (jobframework)
WARNING_REASONS = ("Inadmissible", "KueueNotInstalled", "PriorityClassNotFound")


class QueueEvent(NamedTuple):
    """An Event for the job (the job planner records it as its own Event)."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class QueueInputs:
    """What the planner reads about one job."""

    queue: str | None
    priority_class: str | None
    workload_name: str
    pod_sets_hash: str
    workload: WorkloadView | None
    priorities: Mapping[str, int] = field(default_factory=dict)
    flavors: Mapping[str, FlavorView] = field(default_factory=dict)
    kueue_served: bool = True
    workers_left: int = 0  # the job's pods not finished yet, Terminating ones too: they still hold the quota
    finished_phase: Phase | None = None  # Succeeded | Failed once the job has finished
    suspended: bool = False  # the user's spec.suspend: the Workload is deactivated, its quota given back
    previous: Mapping[str, Any] = field(default_factory=dict)  # the job's status.queue as last written
    workers: int = 0  # spec.workers: the workers' pod set's count
    min_workers: int | None = None  # the workers' pod set's minCount (elastic jobs): partial admission allowed
    # The Workload is someone else's (label kueue.x-k8s.io/prebuilt-workload-name; MultiKueue's copy on a worker
    # cluster): wait for it, never create or replace it, as Kueue's own integrations do with prebuilt Workloads.
    prebuilt: bool = False


@dataclass(frozen=True)
class Hold:
    """Why no worker of the job may run now (phase Queued)."""

    reason: str
    message: str


@dataclass(frozen=True)
class QueueDecision:
    hold: Hold | None = None
    placement: Mapping[str, QueuePlacement] = field(default_factory=dict)
    create: bool = False  # create the desired Workload (the caller builds it: queueing/workload.py)
    active: bool | None = None  # set the Workload's spec.active to this (None: leave it)
    delete: WorkloadView | None = None
    workload_status: Mapping[str, Any] | None = None  # conditions (and admission) to write on the Workload
    status: Mapping[str, Any] | None = None  # the job's status.queue; None: the job is not queued
    admitted_workers: int | None = None  # Kueue admitted only this many workers (partial admission); None: all
    events: tuple[QueueEvent, ...] = ()


def _condition(kind: str, status: bool, reason: str, message: str, now: str) -> dict[str, Any]:
    value = "True" if status else "False"
    return {"type": kind, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}


def released_quota(workload: WorkloadView, now: str) -> dict[str, Any]:
    """What Kueue's job integrations write once an evicted job's pods are gone: the quota goes back and the
    Workload waits in its queue again."""
    evicted = workload.evicted
    reason = evicted.reason if evicted else ""
    message = evicted.message if evicted else "the job's workers stopped"
    return {
        "admission": None,
        "conditions": [
            _condition("QuotaReserved", False, "Pending", message, now),
            _condition("Admitted", False, "NoReservation", "The workload has no reservation", now),
            _condition("Requeued", reason in REQUEUED_AFTER, reason or "Pending", message, now),
        ],
    }


def finished_status(phase: Phase, now: str) -> dict[str, Any]:
    message = "the TrainingJob succeeded" if phase == Phase.SUCCEEDED else "the TrainingJob failed"
    return {"conditions": [_condition("Finished", True, str(phase), message, now)]}


def admitted_message(inputs: QueueInputs, cluster_queue: str, admitted_workers: int | None) -> str:
    """Who admitted the job, and why with fewer workers than it asks for when Kueue admitted it partially."""
    message = f"admitted by ClusterQueue {cluster_queue}"
    if admitted_workers is None:
        return message
    return (
        f"{message} with {admitted_workers} of the {inputs.workers} workers asked: Kueue's partial admission "
        f"(the quota had room for no more; elastic.minWorkers is {inputs.min_workers}); the workers are not "
        "added later, the Workload keeps this count until it is evicted or replaced"
    )


def queue_status(
    inputs: QueueInputs,
    workload: WorkloadView | None,
    hold: Hold | None,
    now: str,
    admitted_workers: int | None = None,
) -> dict[str, Any]:
    """status.queue: where the job waits or runs, why, how many workers Kueue admitted when fewer than asked, and
    how long it has been queued in all."""
    previous = inputs.previous
    cluster_queue = workload.cluster_queue if workload else ""
    status: dict[str, Any] = {
        "name": inputs.queue,
        "workload": inputs.workload_name,
        "clusterQueue": workload.cluster_queue if workload else previous.get("clusterQueue"),
        "admitted": hold is None,
        "reason": hold.reason if hold else "Admitted",
        "message": hold.message if hold else admitted_message(inputs, cluster_queue or "", admitted_workers),
        "admittedWorkers": admitted_workers if hold is None else None,
        "queuedSeconds": int(previous.get("queuedSeconds", 0)),
        "queuedSince": previous.get("queuedSince"),
        "admittedTime": previous.get("admittedTime"),
    }
    since = parse_time(previous.get("queuedSince"))
    if hold is not None and since is None:
        status["queuedSince"] = now
    elif hold is None and since is not None:
        waited = int((parse_time(now) - since).total_seconds())  # type: ignore[operator]
        status.update(queuedSeconds=status["queuedSeconds"] + max(waited, 0), queuedSince=None, admittedTime=now)
    return {key: value for key, value in status.items() if value is not None}


def transition_events(previous: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[QueueEvent, ...]:
    """An Event when the job is admitted, and when the reason it waits changes (not on every pass)."""
    if status.get("reason") == previous.get("reason") and status.get("message") == previous.get("message"):
        return ()
    reason, message = str(status["reason"]), str(status["message"])
    if status.get("admitted"):
        return (QueueEvent("Normal", "Admitted", f"Workload {status['workload']} {message}"),)
    warning = reason in WARNING_REASONS
    evicted = reason in ("Preempted", "Evicted") or reason.startswith("Evicted")
    return (QueueEvent("Warning" if warning or evicted else "Normal", reason if evicted else "Queued", message),)


def plan_queue(inputs: QueueInputs, now: datetime.datetime) -> QueueDecision:
    """The whole decision for one job (see the module docstring)."""
    if not inputs.queue:
        return (
            QueueDecision(delete=inputs.workload)
            if inputs.workload and not inputs.workload.deleting
            else QueueDecision()
        )
    stamp = format_time(now)
    decision = _decide(inputs, stamp)
    status = queue_status(inputs, inputs.workload, decision.hold, stamp, decision.admitted_workers)
    events = transition_events(inputs.previous, status) + decision.events
    return dataclasses.replace(decision, status=status, events=events)


def _decide(inputs: QueueInputs, now: str) -> QueueDecision:
    workload = inputs.workload
    if inputs.finished_phase:
        finish = workload is not None and not workload.finished and not workload.deleting
        return QueueDecision(workload_status=finished_status(inputs.finished_phase, now) if finish else None)
    if not inputs.kueue_served:
        return QueueDecision(Hold("KueueNotInstalled", not_installed(inputs.queue or "")))
    if inputs.priority_class and inputs.priority_class not in inputs.priorities:
        message = f"WorkloadPriorityClass {inputs.priority_class!r} does not exist; create it or fix the label"
        return QueueDecision(Hold("PriorityClassNotFound", message))
    if workload is None and inputs.prebuilt:
        name = inputs.workload_name
        message = f"waiting for Workload {name}, which the label kueue.x-k8s.io/prebuilt-workload-name names"
        return QueueDecision(Hold("Pending", message))
    if workload is None:
        message = f"waiting for Kueue to admit Workload {inputs.workload_name} in LocalQueue {inputs.queue}"
        return QueueDecision(Hold("Pending", message), create=True)
    if workload.active == inputs.suspended:
        state = "deactivated: the job is suspended" if inputs.suspended else "activated: the job is resumed"
        hold = (
            Hold("Suspended", "the job is suspended (spec.suspend)") if inputs.suspended else _waiting(inputs, workload)
        )
        return QueueDecision(hold, active=not inputs.suspended, events=(QueueEvent("Normal", "Workload", state),))
    if inputs.suspended:
        return QueueDecision(Hold("Suspended", "the job is suspended (spec.suspend); its Workload is inactive"))
    if workload.deleting:
        return QueueDecision(Hold("Pending", f"waiting for the previous Workload {workload.name} to be deleted"))
    if not inputs.prebuilt and (workload.pod_sets_hash != inputs.pod_sets_hash or workload.queue != inputs.queue):
        return _replace(inputs, workload)
    if workload.evicted is not None:
        return _evicted(inputs, workload, now)
    if workload.admitted:
        return QueueDecision(placement=placement(workload, inputs.flavors), admitted_workers=partial(inputs, workload))
    return QueueDecision(_waiting(inputs, workload))


def partial(inputs: QueueInputs, workload: WorkloadView) -> int | None:
    """The workers Kueue admitted when it admitted fewer than asked (podSetAssignments[].count below the pod set's
    count, never below its minCount); None when it admitted all, or the job allows no partial admission."""
    count = workload.assigned_count(WORKER)
    if inputs.min_workers is None or count is None or count >= inputs.workers:
        return None
    return count


def not_installed(queue: str) -> str:
    return (
        f"the job is labelled for LocalQueue {queue}, but this cluster does not serve workloads.kueue.x-k8s.io "
        "(Kueue is not installed or not running): it waits until Kueue is installed, or the label is removed"
    )


def _replace(inputs: QueueInputs, workload: WorkloadView) -> QueueDecision:
    message = f"the job's pod sets or queue changed: replacing Workload {workload.name} (queued again)"
    event = QueueEvent("Normal", "WorkloadReplaced", message)
    return QueueDecision(Hold("Pending", message), delete=workload, events=(event,))


def _evicted(inputs: QueueInputs, workload: WorkloadView, now: str) -> QueueDecision:
    evicted = workload.evicted
    assert evicted is not None
    reason = (
        "Preempted" if evicted.reason == "Preempted" else f"Evicted{evicted.reason}" if evicted.reason else "Evicted"
    )
    hold = Hold(
        reason, f"evicted by Kueue ({evicted.reason}): {evicted.message}; the workers stop, the checkpoint stays"
    )
    if inputs.workers_left == 0 and workload.quota_reserved:
        return QueueDecision(hold, workload_status=released_quota(workload, now))
    return QueueDecision(hold)


def _waiting(inputs: QueueInputs, workload: WorkloadView) -> Hold:
    reserved = workload.condition("QuotaReserved")
    if workload.quota_reserved:
        return Hold("AdmissionChecks", f"quota reserved in ClusterQueue {workload.cluster_queue}; waiting for checks")
    if reserved is not None and reserved.message:
        return Hold(reserved.reason or "Pending", reserved.message)
    return Hold("Pending", f"waiting for Kueue to admit Workload {workload.name} in LocalQueue {inputs.queue}")
