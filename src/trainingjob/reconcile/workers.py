"""Planning the worker gang of a running job: create, restart (failures, disruptions, spec changes), time out.

Every restart bumps `status.attempt` in the same status write that records why (restartCount, disruptionCount,
lastFailure, nextRestartTime); that write carries a resourceVersion precondition, so a restart is recorded
exactly once even when plans race with a stale cache. The same write lists the uids of the pods the restart
replaces (`status.replacedPods`): the pods are deleted after it, and until they are gone they are only deleted
again, never decided on again, so a failed delete cannot count one failure twice. Waiting for a backoff delay is
a requeue, never a sleep.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field

from trainingjob.api.names import worker_pod_name
from trainingjob.api.types import TrainingJob, format_time, parse_time
from trainingjob.builders.common import spec_hash
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig
from trainingjob.progress.report import checkpoint_status, progress_status
from trainingjob.reconcile import policies
from trainingjob.reconcile.actions import CreateChild, DeleteChild, Event, Plan
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.status import Outcome, build_status, failure_message, pods_outcome


def delete_pods(pods: Iterable[PodView]) -> list[DeleteChild]:
    return [DeleteChild("Pod", p.name, p.uid or None) for p in pods]


def counters(job: TrainingJob, **changes: int) -> dict[str, int]:
    status = job.status
    values = {key: int(status.get(key, 0)) for key in ("attempt", "restartCount", "disruptionCount")}
    return {key: values[key] + changes.get(key, 0) for key in values}


@dataclass
class Restart:
    """A decided restart: why, which pods go, and how the counters move."""

    reason: str
    message: str
    replace: list[PodView]
    counter_changes: dict[str, int] = field(default_factory=dict)
    delay_seconds: int = 0
    failure: PodView | None = None
    # Every failed worker behind this restart: each gets its own WorkerFailed event.
    failed: tuple[PodView, ...] = ()


@dataclass
class Gang:
    """The job's live workers split by whether they match the current spec."""

    current: dict[int, PodView]
    stale: list[PodView]
    live: list[PodView]
    # Pods a recorded restart replaces that are not deleted yet: counted already, only to be deleted.
    replaced: list[PodView] = field(default_factory=list)


def observe_gang(job: TrainingJob, observed: ObservedChildren) -> Gang:
    fingerprint = spec_hash(job)
    recorded = set(job.status.get("replacedPods") or ())
    replaced = [p for p in observed.pods if p.live and p.uid in recorded]
    live = [p for p in observed.pods if p.live and p.uid not in observed.released_pods and p.uid not in recorded]
    current = {p.index: p for p in live if p.spec_hash == fingerprint and 0 <= p.index < job.spec.workers}
    stale = [p for p in live if current.get(p.index) is not p]
    return Gang(current, stale, live, replaced)


def plan_workers(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig, result: Plan
) -> None:
    now_text = format_time(now)
    gang = observe_gang(job, observed)
    started = bool(job.status.get("startTime"))
    resumed = resume_changes(job, now_text)
    if resumed:
        result.events.append(resume_event(job))
    changes = {**resumed, **progress_changes(job, observed)}
    changes["replacedPods"] = [p.uid for p in gang.replaced] or None
    result.actions += delete_pods(p for p in gang.replaced if p.uid not in observed.released_pods)
    decision = decide(job, gang, started, now_text)
    if isinstance(decision, Outcome):
        fail(job, gang, decision, now_text, result, changes)
        return
    if decision is not None:
        start_restart(job, gang, decision, now, result, changes)
        return
    result.actions += delete_pods(gang.stale)
    ignored = {i for i, p in gang.current.items() if p.phase == "Failed" and not p.disrupted}
    create_missing(job, observed, gang, now, config, result, changes)
    restarting = job.status.get("phase") == "Restarting"
    outcome = pods_outcome(job, {i: p for i, p in gang.current.items()}, restarting, ignored)
    outcome = check_timeouts(job, outcome, now, changes, result) or outcome
    if outcome.phase == "Running":
        changes["nextRestartTime"] = None
    if outcome.phase == "Failed":
        fail(job, gang, outcome, now_text, result, changes)
        return
    result.status = build_status(
        job, outcome, gang.current, counters(job, **changes.pop("_counters", {})), now_text, changes
    )
    add_transition_events(job, outcome, result.events)


def resume_changes(job: TrainingJob, now: str) -> dict:
    """Coming back from suspension: if training had begun, add the pause up and start a new attempt.

    activeDeadlineSeconds counts from startTime, so only a pause after it may be taken off; time queued before
    the first start (created suspended, e.g. by Kueue) was never counted and must not extend the deadline.
    """
    suspended_at = parse_time(job.status.get("suspendTime"))
    if suspended_at is None:
        return {}
    changes: dict = {"suspendTime": None}
    if job.status.get("startTime"):
        paused = int((parse_time(now) - suspended_at).total_seconds())
        changes["suspendedSeconds"] = int(job.status.get("suspendedSeconds", 0)) + paused
        changes["_counters"] = {"attempt": 1}
    return changes


def resume_event(job: TrainingJob) -> Event:
    """Every resume says so, the pair of `Suspended`: a job created suspended (queued) has no TrainingResumed to
    come, it will be TrainingStarted."""
    if job.status.get("startTime"):
        return Event("Normal", "Resumed", "spec.suspend is false: recreating the workers from the last checkpoint")
    return Event("Normal", "Resumed", "spec.suspend is false: creating the workers")


def progress_changes(job: TrainingJob, observed: ObservedChildren) -> dict:
    """Fold the newest accepted progress report into status.progress and status.lastCheckpoint."""
    report = observed.progress
    if report is None:
        return {}
    since = job.status.get("attemptStartTime") or job.status.get("startTime")
    changes: dict = {"progress": progress_status(report, job.status.get("progress") or {}, since)}
    checkpoint = checkpoint_status(report)
    if checkpoint is not None:
        changes["lastCheckpoint"] = checkpoint
    return changes


def decide(job: TrainingJob, gang: Gang, started: bool, now: str) -> Restart | Outcome | None:
    """Failures first (they may end the job), then disruptions, then spec changes."""
    failed = sorted(
        (p for p in gang.current.values() if p.phase == "Failed" and not p.disrupted), key=lambda p: p.index
    )
    restart_for_failure: list[PodView] = []
    for pod in failed:
        decision = policies.decide_failure(job.spec, pod)
        if decision.action == "Fail":
            return Outcome("Failed", decision.reason, failure_message(pod))
        if decision.action == "Restart":
            restart_for_failure.append(pod)
    if restart_for_failure:
        return failure_restart(job, gang, restart_for_failure)
    disrupted = disruption(job, gang, started)
    if disrupted is not None:
        return disrupted
    if started and gang.stale and any(p.spec_hash != spec_hash(job) for p in gang.live):
        return Restart(
            "SpecChanged", "the spec changed; restarting all workers with the new spec", gang.live, {"attempt": 1}
        )
    return None


def failure_restart(job: TrainingJob, gang: Gang, failed: list[PodView]) -> Restart | Outcome:
    restarts = int(job.status.get("restartCount", 0))
    first = failed[0]
    if policies.backoff_limit_reached(job.spec, restarts):
        return Outcome(
            "Failed", "BackoffLimitExceeded", f"{failure_message(first)}; backoffLimit {job.spec.backoff_limit} reached"
        )
    delay = policies.backoff_seconds(job.spec, restarts + 1)
    message = f"{failure_message(first)}; restart {restarts + 1}/{job.spec.backoff_limit} in {delay}s"
    replace = gang.live if job.spec.failure_policy.restart_strategy == "Gang" else failed
    return Restart("WorkerFailed", message, replace, {"attempt": 1, "restartCount": 1}, delay, first, tuple(failed))


def disruption(job: TrainingJob, gang: Gang, started: bool) -> Restart | None:
    """An evicted/preempted worker, or one deleted by someone else after training started: always retried."""
    gang_wide = job.spec.failure_policy.restart_strategy == "Gang"
    disrupted = next((p for p in gang.current.values() if p.disrupted and p.phase == "Failed"), None)
    if disrupted is not None:
        message = f"worker {disrupted.index} was disrupted ({disrupted.reason or 'evicted'})"
        return Restart(
            "WorkerDisrupted", message, gang.live if gang_wide else [disrupted], {"attempt": 1, "disruptionCount": 1}
        )
    if not started:
        return None
    present = {p.name for p in gang.live}
    for worker in job.status.get("workerStatuses") or []:
        name, index = worker.get("podName"), worker.get("workerId", 0)
        if worker.get("phase") in ("Pending", "Running") and name not in present and index < job.spec.workers:
            return Restart(
                "WorkerDisrupted",
                f"worker {index} (pod {name}) was deleted",
                gang.live if gang_wide else [],
                {"attempt": 1, "disruptionCount": 1},
            )
    return None


def start_restart(
    job: TrainingJob, gang: Gang, restart: Restart, now: datetime.datetime, result: Plan, changes: dict
) -> None:
    """Record the restart and delete the pods it replaces; new pods come once names are free and the delay is over."""
    now_text = format_time(now)
    counter_changes = {**changes.pop("_counters", {})}
    for key, value in restart.counter_changes.items():
        counter_changes[key] = counter_changes.get(key, 0) + value if key != "attempt" else 1
    next_time = format_time(now + datetime.timedelta(seconds=restart.delay_seconds)) if restart.delay_seconds else None
    changes.update({"nextRestartTime": next_time, "attemptStartTime": None})
    if restart.failure is not None:
        changes["lastFailure"] = failure_record(restart.failure, now_text)
    replaced_uids = [*(changes.get("replacedPods") or []), *(p.uid for p in restart.replace if p.uid)]
    changes["replacedPods"] = replaced_uids or None
    result.actions += delete_pods(restart.replace)
    replaced = {p.name for p in restart.replace}
    survivors = {i: p for i, p in gang.current.items() if p.name not in replaced}
    outcome = Outcome("Restarting", restart.reason, restart.message)
    result.status = build_status(job, outcome, survivors, counters(job, **counter_changes), now_text, changes)
    result.events += worker_failed_events(restart.failed)
    result.events.append(
        Event("Normal" if restart.reason == "SpecChanged" else "Warning", "Restarting", restart.message)
    )
    if restart.delay_seconds:
        result.requeue_after = restart.delay_seconds


def create_missing(
    job: TrainingJob,
    observed: ObservedChildren,
    gang: Gang,
    now: datetime.datetime,
    config: OperatorConfig,
    result: Plan,
    changes: dict,
) -> None:
    """Create workers whose names are free, unless a restart's backoff delay is still running."""
    next_restart = parse_time(job.status.get("nextRestartTime"))
    if next_restart is not None and next_restart > now:
        result.requeue_after = (next_restart - now).total_seconds()
        return
    attempt = counters(job, **changes.get("_counters", {}))["attempt"]
    taken = {p.name for p in observed.pods} | observed.claimed_pods
    missing = [i for i in range(job.spec.workers) if worker_pod_name(job.name, i) not in taken]
    result.actions += [CreateChild(desired_worker_pod(job, i, attempt, config)) for i in missing]
    if missing and not job.status.get("attemptStartTime"):
        changes["attemptStartTime"] = format_time(now)


def check_timeouts(
    job: TrainingJob, outcome: Outcome, now: datetime.datetime, changes: dict, result: Plan
) -> Outcome | None:
    """activeDeadlineSeconds (from the first start, suspended time excluded) and startupTimeoutSeconds."""
    spec = job.spec
    suspended = int(changes.get("suspendedSeconds", job.status.get("suspendedSeconds", 0)))
    deadline_left = policies.remaining(
        spec.active_deadline_seconds, policies.active_seconds(job.status.get("startTime"), suspended, now)
    )
    if deadline_left is not None and deadline_left <= 0:
        return Outcome("Failed", "DeadlineExceeded", f"activeDeadlineSeconds {spec.active_deadline_seconds} reached")
    waiting = outcome.phase in ("Pending", "Restarting")
    attempt_start = changes.get("attemptStartTime") or job.status.get("attemptStartTime")
    startup_left = policies.remaining(spec.startup_timeout_seconds, policies.seconds_between(attempt_start, now))
    if waiting and startup_left is not None and startup_left <= 0:
        return Outcome(
            "Failed",
            "StartupTimeout",
            f"workers not all running after startupTimeoutSeconds {spec.startup_timeout_seconds}: {outcome.message}",
        )
    waits = [left for left in (deadline_left, startup_left if waiting else None) if left is not None]
    if waits:
        soonest = min(waits)
        result.requeue_after = soonest if result.requeue_after is None else min(result.requeue_after, soonest)
    return None


def failure_record(pod: PodView, now: str) -> dict:
    """status.lastFailure: which worker failed, how, and when."""
    optional = {"exitCode": pod.exit_code, "reason": pod.reason, "message": pod.message}
    return {
        "workerId": pod.index,
        "podName": pod.name,
        "time": now,
        **{key: value for key, value in optional.items() if value is not None},
    }


def worker_failed_events(pods: Iterable[PodView]) -> list[Event]:
    """One WorkerFailed Warning per failed worker (index, exit code, reason in the message).

    Emitted only from the plan that acts on the failure (a restart records the pod in replacedPods, a failure ends
    the job), so each failure gives one event, not one per reconcile.
    """
    return [Event("Warning", "WorkerFailed", failure_message(pod)) for pod in pods]


def fail(job: TrainingJob, gang: Gang, outcome: Outcome, now: str, result: Plan, changes: dict) -> None:
    changes["nextRestartTime"] = None
    failed = next((p for p in gang.current.values() if p.phase == "Failed" and not p.disrupted), None)
    if failed is not None and outcome.reason not in ("DeadlineExceeded", "StartupTimeout"):
        changes["lastFailure"] = failure_record(failed, now)
        if outcome.reason != "WorkerFailed":  # e.g. BackoffLimitExceeded: still say which worker failed, and how
            result.events += worker_failed_events([failed])
    result.status = build_status(
        job, outcome, gang.current, counters(job, **changes.pop("_counters", {})), now, changes
    )
    result.events.append(Event("Warning", outcome.reason, outcome.message))


TRANSITION_EVENTS = {"Running": ("Normal", "TrainingStarted"), "Succeeded": ("Normal", "TrainingSucceeded")}


def add_transition_events(job: TrainingJob, outcome: Outcome, events: list[Event]) -> None:
    previous = job.status.get("phase")
    if outcome.phase == previous or outcome.phase not in TRANSITION_EVENTS:
        return
    event_type, reason = TRANSITION_EVENTS[outcome.phase]
    if outcome.phase == "Running" and job.status.get("startTime"):
        reason = "TrainingResumed"  # running again after a restart or a suspension
    events.append(Event(event_type, reason, outcome.message))
