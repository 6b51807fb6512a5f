"""The pure planner: (job, observed children, now) -> Plan(actions, status, events).

Level-triggered: it looks only at what is (the job, the cached children) and never at what happened, so calling it
twice, late, or after an operator restart gives the same answer. Restarts are gang restarts: a new `attempt`
number, every live pod of older attempts deleted, new pods created once the names are free.
"""

from __future__ import annotations

import datetime

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name, worker_pod_name
from trainingjob.api.types import TrainingJob, format_time
from trainingjob.builders.common import spec_hash
from trainingjob.builders.configmap import desired_config_data, desired_config_map
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.builders.service import desired_service
from trainingjob.config import OperatorConfig
from trainingjob.reconcile.actions import (
    AddFinalizer,
    CreateChild,
    DeleteChild,
    Event,
    Plan,
    RemoveFinalizer,
    ReplaceChild,
)
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.status import TERMINAL_PHASES, Outcome, build_status, pods_outcome
from trainingjob.reconcile.validation import spec_errors


def plan(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig) -> Plan:
    if job.deleting:
        return plan_deletion(job, observed)
    result = Plan()
    if k.FINALIZER not in job.finalizers:
        result.actions.append(AddFinalizer())
    if job.status.get("phase") in TERMINAL_PHASES:
        result.actions += delete_pods(p for p in observed.pods if p.active)
        result.status = dict(job.status)
        return result
    problems = spec_errors(job.spec) + list(observed.rejections)
    if problems:
        return fail_invalid(job, observed, result, "; ".join(problems), format_time(now))
    result.actions += repair_shared_children(job, observed, result.events)
    plan_workers(job, observed, format_time(now), config, result)
    return result


def plan_deletion(job: TrainingJob, observed: ObservedChildren) -> Plan:
    """Delete the workers now (don't leave training running until GC gets there), then let the job go."""
    actions = delete_pods(p for p in observed.pods if p.live)
    if k.FINALIZER in job.finalizers:
        actions.append(RemoveFinalizer())
    return Plan(actions=actions, status=dict(job.status))


def delete_pods(pods) -> list[DeleteChild]:
    return [DeleteChild("Pod", p.name, p.uid or None) for p in pods]


def fail_invalid(job: TrainingJob, observed: ObservedChildren, result: Plan, message: str, now: str) -> Plan:
    outcome = Outcome("Failed", "InvalidSpec", message)
    result.actions += delete_pods(p for p in observed.pods if p.live)
    result.status = build_status(job, outcome, {}, counters(job), now)
    result.events.append(Event("Warning", "InvalidSpec", message))
    return result


def repair_shared_children(job: TrainingJob, observed: ObservedChildren, events: list[Event]) -> list:
    """Create the Service and ConfigMap when missing; put back ConfigMap data someone changed."""
    actions: list = []
    if not observed.service_exists:
        actions.append(CreateChild(desired_service(job)))
    if observed.config_data is None:
        actions.append(CreateChild(desired_config_map(job)))
    else:
        wanted = desired_config_data(job)
        if dict(observed.config_data) != wanted:
            actions.append(ReplaceChild(desired_config_map(job)))
            events.append(Event("Normal", "ConfigRestored", f"restored {config_map_name(job.name)} to the job's spec"))
    return actions


def counters(job: TrainingJob, **changes: int) -> dict[str, int]:
    status = job.status
    values = {
        "attempt": int(status.get("attempt", 0)),
        "restartCount": int(status.get("restartCount", 0)),
        "disruptionCount": int(status.get("disruptionCount", 0)),
    }
    return {key: values[key] + changes.get(key, 0) for key in values}


def restart_reason(job: TrainingJob, live: list[PodView], attempt: int, fingerprint: str) -> tuple[str, str] | None:
    """Why the running gang must be replaced, if it must: a spec change or a disruption of a worker."""
    if not job.status.get("startTime"):
        return None
    ours = [p for p in live if p.attempt == attempt]
    if any(p.spec_hash != fingerprint for p in ours):
        return "SpecChanged", "the spec changed; restarting all workers with the new spec"
    disrupted = next((p for p in ours if p.disrupted and p.phase == "Failed"), None)
    if disrupted:
        return "WorkerDisrupted", f"worker {disrupted.index} was disrupted ({disrupted.reason or 'evicted'})"
    present = {p.name for p in live}
    recorded = [w for w in job.status.get("workerStatuses") or [] if w.get("phase") in ("Pending", "Running")]
    for worker in recorded:
        if worker.get("podName") not in present and worker.get("workerId", 0) < job.spec.workers:
            return "WorkerDisrupted", f"worker {worker['workerId']} (pod {worker['podName']}) was deleted"
    return None


def plan_workers(job: TrainingJob, observed: ObservedChildren, now: str, config: OperatorConfig, result: Plan) -> None:
    fingerprint = spec_hash(job)
    attempt = int(job.status.get("attempt", 0))
    live = [p for p in observed.pods if p.live]
    restart = restart_reason(job, live, attempt, fingerprint)
    if restart is not None:
        start_restart(job, observed, restart, now, result)
        return
    restarting = job.status.get("phase") == "Restarting"
    current = {p.index: p for p in live if is_current(p, job, attempt, fingerprint)}
    stale = [p for p in live if p.index not in current or current[p.index] is not p]
    result.actions += delete_pods(stale)
    taken = {p.name for p in observed.pods} | observed.claimed_pods
    missing = [i for i in range(job.spec.workers) if worker_pod_name(job.name, i) not in taken]
    result.actions += [CreateChild(desired_worker_pod(job, i, attempt, config)) for i in missing]
    outcome = pods_outcome(job, current, restarting)
    result.status = build_status(job, outcome, current, counters(job), now)
    add_transition_events(job, outcome, result.events)
    if outcome.phase == "Failed":
        result.actions += delete_pods(p for p in current.values() if p.active)


def is_current(pod: PodView, job: TrainingJob, attempt: int, fingerprint: str) -> bool:
    return pod.attempt == attempt and pod.spec_hash == fingerprint and 0 <= pod.index < job.spec.workers


def start_restart(
    job: TrainingJob, observed: ObservedChildren, restart: tuple[str, str], now: str, result: Plan
) -> None:
    """Bump the attempt and delete the whole gang; the next reconciles create the new one."""
    reason, message = restart
    changes = {"attempt": 1, **({"disruptionCount": 1} if reason == "WorkerDisrupted" else {})}
    outcome = Outcome("Restarting", reason, message)
    result.actions += delete_pods(p for p in observed.pods if p.live)
    result.status = build_status(job, outcome, {}, counters(job, **changes), now)
    result.events.append(Event("Normal" if reason == "SpecChanged" else "Warning", "Restarting", message))


TRANSITION_EVENTS = {
    "Running": ("Normal", "TrainingStarted"),
    "Succeeded": ("Normal", "TrainingSucceeded"),
    "Failed": ("Warning", "WorkerFailed"),
}


def add_transition_events(job: TrainingJob, outcome: Outcome, events: list[Event]) -> None:
    previous = job.status.get("phase")
    if outcome.phase == previous or outcome.phase not in TRANSITION_EVENTS:
        return
    event_type, reason = TRANSITION_EVENTS[outcome.phase]
    if outcome.phase == "Running" and previous == "Restarting":
        reason = "TrainingResumed"
    events.append(Event(event_type, reason, outcome.message))
