"""Planning the worker gang of a running job: create, restart (failures, disruptions, spec changes), time out,
and say what keeps the workers from running (blockers.py).

Every restart bumps `status.attempt` in the same status write that records why (restartCount, disruptionCount,
lastFailure, nextRestartTime); that write carries a resourceVersion precondition, so a restart is recorded
exactly once even when plans race with a stale cache. The same write lists the uids of the pods the restart
replaces (`status.replacedPods`): the pods are deleted after it, and until they are gone they are only deleted
again, never decided on again, so a failed delete cannot count one failure twice. Waiting for a backoff delay is
a requeue, never a sleep.

Each step returns the status fields it sets and how it moves the counters (a `Changes`); the status is built
once, from their sum.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.names import pod_name
from trainingjob.api.replicas import Replica, desired_replicas, is_desired
from trainingjob.api.status import Counters, Phase
from trainingjob.api.times import format_time, whole_seconds
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod, has_mpi_launcher
from trainingjob.builders.secret import desired_mpi_key_secret
from trainingjob.config import OperatorConfig
from trainingjob.progress.history import history_names
from trainingjob.progress.report import checkpoint_status, progress_status
from trainingjob.reconcile import blockers, gangs, policies
from trainingjob.reconcile.actions import CreateChild, DeleteChild, Event, Plan
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.restarts import Gang, Restart, decide, failure_record, worker_failed_events
from trainingjob.reconcile.spec_version import current_worker_spec
from trainingjob.reconcile.status import Outcome, build_status, pods_outcome


def delete_pods(pods: Iterable[PodView], force: bool = False) -> list[DeleteChild]:
    return [DeleteChild("Pod", p.name, p.uid or None, force) for p in pods]


def counters(job: TrainingJob, moves: Counters | None = None) -> Counters:
    return job.status.moved + (moves or Counters())


@dataclass
class Changes:
    """Status fields a step sets (JobStatus field names; None removes one) and how much it moves the counters."""

    fields: dict[str, Any] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)

    def __add__(self, other: Changes) -> Changes:
        """Later fields win; counter moves add up, except that one plan starts at most one new attempt."""
        moved = self.counters + other.counters
        moved = Counters(
            max(self.counters.attempt, other.counters.attempt), moved.restart_count, moved.disruption_count
        )
        return Changes({**self.fields, **other.fields}, moved)


def observe_gang(job: TrainingJob, observed: ObservedChildren) -> Gang:
    recorded = set(job.status.replaced_pods or ())
    replaced = [p for p in observed.pods if p.live and p.uid in recorded]
    live = [p for p in observed.pods if p.live and p.uid not in observed.released_pods and p.uid not in recorded]
    spec = current_worker_spec(job, live)
    current = {p.replica: p for p in live if p.spec_hash == spec.pod_hash and is_desired(job.spec, p.replica)}
    stale = [p for p in live if current.get(p.replica) is not p]
    leaving = {**observed.departed_pods, **{p.name: p for p in observed.pods if p.deleting}}
    return Gang(current, stale, live, spec, replaced, leaving)


def plan_workers(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig, result: Plan
) -> None:
    gang = observe_gang(job, observed)
    changes = opening_changes(job, observed, gang, now, result.events)
    result.actions += delete_pods(p for p in gang.replaced if p.uid not in observed.released_pods)
    decision = decide(job, gang, started=job.status.start_time is not None)
    if isinstance(decision, Outcome):
        fail(job, gang, decision, now, result, changes)
    elif decision is not None:
        start_restart(job, gang, decision, now, result, changes)
    else:
        run_gang(job, observed, gang, now, config, result, changes)


def opening_changes(
    job: TrainingJob, observed: ObservedChildren, gang: Gang, now: datetime.datetime, events: list[Event]
) -> Changes:
    """What every plan of a running job records: a resume, new progress, the pods still to delete, the spec."""
    resumed = resume_changes(job, now)
    if resumed.fields:
        events.append(resume_event(job))
    pending = Changes({"replaced_pods": tuple(p.uid for p in gang.replaced) or None, "worker_spec": gang.spec})
    return resumed + progress_changes(job, observed) + pending


def resume_changes(job: TrainingJob, now: datetime.datetime) -> Changes:
    """Coming back from suspension: if training had begun, add the pause up and start a new attempt.

    activeDeadlineSeconds counts from startTime, so only a pause after it may be taken off; time queued before
    the first start (created suspended, e.g. by Kueue) was never counted and must not extend the deadline.
    """
    suspended_at = job.status.suspend_time
    if suspended_at is None:
        return Changes()
    if job.status.start_time is None:
        return Changes({"suspend_time": None})
    paused = int((whole_seconds(now) - suspended_at).total_seconds())
    fields = {"suspend_time": None, "suspended_seconds": (job.status.suspended_seconds or 0) + paused}
    return Changes(fields, Counters(attempt=1))


def resume_event(job: TrainingJob) -> Event:
    """Every resume says so, the pair of `Suspended`: a job created suspended (queued) has no TrainingResumed to
    come, it will be TrainingStarted."""
    if job.status.start_time is not None:
        return Event("Normal", "Resumed", "spec.suspend is false: recreating the workers from the last checkpoint")
    return Event("Normal", "Resumed", "spec.suspend is false: creating the workers")


def progress_changes(job: TrainingJob, observed: ObservedChildren) -> Changes:
    """Fold the newest accepted progress report into status.progress and status.lastCheckpoint."""
    report = observed.progress
    if report is None:
        return Changes()
    since = job.status.attempt_start_time or job.status.start_time
    previous = job.status.progress or {}
    history = history_names(job.annotations)
    fields: dict[str, Any] = {"progress": progress_status(report, previous, since and format_time(since), history)}
    checkpoint = checkpoint_status(report)
    if checkpoint is not None:
        fields["last_checkpoint"] = checkpoint
    return Changes(fields)


def start_restart(
    job: TrainingJob, gang: Gang, restart: Restart, now: datetime.datetime, result: Plan, changes: Changes
) -> None:
    """Record the restart and delete the pods it replaces; new pods come once names are free and the delay is over."""
    next_time = now + datetime.timedelta(seconds=restart.delay_seconds) if restart.delay_seconds else None
    fields: dict[str, Any] = {"next_restart_time": next_time, "attempt_start_time": None}
    if restart.failure is not None:
        fields["last_failure"] = failure_record(restart.failure, now)
    replaced_uids = (*(changes.fields.get("replaced_pods") or ()), *(p.uid for p in restart.replace if p.uid))
    fields["replaced_pods"] = replaced_uids or None
    changes = changes + Changes(fields, restart.counter_changes)
    result.actions += delete_pods(restart.replace)
    replaced = {p.name for p in restart.replace}
    survivors = {i: p for i, p in gang.current.items() if p.name not in replaced}
    outcome = Outcome(Phase.RESTARTING, restart.reason, restart.message)
    result.status = build_status(job, outcome, survivors, counters(job, changes.counters), now, changes.fields)
    result.events += worker_failed_events(restart.failed)
    result.events.append(
        Event("Normal" if restart.reason == "SpecChanged" else "Warning", "Restarting", restart.message)
    )
    if restart.delay_seconds:
        result.requeue_after = restart.delay_seconds


def run_gang(
    job: TrainingJob,
    observed: ObservedChildren,
    gang: Gang,
    now: datetime.datetime,
    config: OperatorConfig,
    result: Plan,
    changes: Changes,
) -> None:
    """No restart is due: create what is missing, and say what keeps the rest from running."""
    result.actions += delete_pods(gang.stale)
    ignored = {r for r, p in gang.current.items() if p.phase == "Failed" and not p.disrupted}
    retry_at = admission_retry_time(job, observed)
    team = gangs.plan_gang(job, observed, gang.current, counters(job, changes.counters).attempt)
    changes = changes + create_missing(job, observed, gang, now, config, result, changes, retry_at, team)
    result.actions += gangs.release_gangs(job, observed, keep=[team.name])
    restarting = job.status.phase is Phase.RESTARTING
    current = dict(gang.current)
    outcome = pods_outcome(job, current, restarting, ignored)
    found: list[blockers.Blocker] = []
    if outcome.phase.waiting:
        if observed.admission is not None and retry_at is not None and retry_at > now:
            changes = changes + release_gang(current, result, changes, retry_at)
            outcome = pods_outcome(job, current, restarting, ignored)
        found = blockers.find_blockers(
            job, current, observed, now, config.stuck_after_seconds, config.force_delete_after_seconds
        )
        found = team.blockers + found
        outcome = Outcome(outcome.phase, outcome.reason, outcome.message + blockers.blocked_summary(found))
    record = gangs.gang_record(job, team, observed, current)
    changes = changes + Changes({"gang": record})
    result.events += gangs.gang_events(job, record)
    force_delete_stuck(observed, now, config, result)
    outcome = check_timeouts(job, outcome, now, changes, result) or outcome
    if outcome.phase is Phase.RUNNING:
        changes = changes + Changes({"next_restart_time": None})
    if outcome.phase is Phase.FAILED:
        fail(job, gang, outcome, now, result, changes)
        return
    blocked = record_blocker(job, found, result.events)
    counted = counters(job, changes.counters)
    refused = refused_workers(job, observed, current) if outcome.phase.waiting else {}
    result.status = build_status(job, outcome, current, counted, now, changes.fields, blocked, refused)
    requeue(
        result, blockers.next_check(observed, job, now, config.stuck_after_seconds, config.force_delete_after_seconds)
    )
    add_transition_events(job, outcome, result.events)


def admission_retry_time(job: TrainingJob, observed: ObservedChildren) -> datetime.datetime | None:
    """When creates refused by admission are tried again: the failure policy's backoff after the last refusal."""
    denial = observed.admission
    if denial is None:
        return None
    return whole_seconds(denial.time) + datetime.timedelta(seconds=policies.backoff_seconds(job.spec, denial.count))


def refused_workers(
    job: TrainingJob, observed: ObservedChildren, current: dict[Replica, PodView]
) -> dict[Replica, tuple[str, str]]:
    """Pods that do not exist because admission refused to create them: (pod name, what admission said)."""
    refusals = {
        r.name: r.message for r in (observed.admission.refusals if observed.admission else ()) if r.kind == "Pod"
    }
    if not refusals:
        return {}
    names = {pod_name(job.name, r.role, r.index): r for r in desired_replicas(job.spec)}
    return {names[n]: (n, message) for n, message in refusals.items() if n in names and names[n] not in current}


def release_gang(
    current: dict[Replica, PodView], result: Plan, changes: Changes, retry_at: datetime.datetime
) -> Changes:
    """A gang that admission will not let complete gives back what it holds (GPUs, quota) until the retry: its
    unfinished pods are deleted, recorded in replacedPods so their going is neither a failure nor a disruption."""
    released = [p for p in current.values() if p.phase in ("Pending", "Running")]
    for pod in released:
        del current[pod.replica]
    result.actions += delete_pods(released)
    uids = (*(changes.fields.get("replaced_pods") or ()), *(p.uid for p in released if p.uid))
    return Changes({"replaced_pods": uids or None, "next_restart_time": retry_at})


def force_delete_stuck(
    observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig, result: Plan
) -> None:
    """The stuck-pod policy: a pod whose node is lost, Terminating past its grace period by force_delete_after."""
    pods = blockers.force_deletions(observed.pods, observed.nodes, now, config.force_delete_after_seconds)
    result.actions += delete_pods(pods, force=True)
    for pod in pods:
        node = observed.nodes[pod.node_name or ""]
        result.events.append(
            Event("Warning", "PodForceDeleted", f"{blockers.subject(pod)} was force-deleted: {node.describe()}")
        )


def record_blocker(job: TrainingJob, found: list[blockers.Blocker], events: list[Event]) -> tuple[str, str] | None:
    """The Blocked condition's (reason, message) for the first blocker, and a Warning Event when it is news."""
    if not found:
        return None
    previous = job.status.condition(blockers.BLOCKED)
    reason, message = blockers.blocked_condition(previous, found[0])
    event = blockers.blocked_event(previous, reason, message)
    if event is not None:
        events.append(event)
    return reason, message


def requeue(result: Plan, seconds: float | None) -> None:
    if seconds is not None:
        result.requeue_after = seconds if result.requeue_after is None else min(result.requeue_after, seconds)


def create_missing(
    job: TrainingJob,
    observed: ObservedChildren,
    gang: Gang,
    now: datetime.datetime,
    config: OperatorConfig,
    result: Plan,
    changes: Changes,
    retry_at: datetime.datetime | None,
    team: gangs.GangPlan,
) -> Changes:
    """Create workers whose names are free, unless a restart's backoff delay or an admission retry is pending; a
    gang's object comes first, and its workers once the cache shows it (`team`, see gangs.py)."""
    waits = [t for t in (job.status.next_restart_time, retry_at) if t is not None and t > now]
    if waits:
        requeue(result, (max(waits) - now).total_seconds())
        return Changes()
    attempt = counters(job, changes.counters).attempt
    taken = {p.name for p in observed.pods} | observed.claimed_pods
    missing = [r for r in desired_replicas(job.spec) if pod_name(job.name, r.role, r.index) not in taken]
    team.quota = gangs.quota_blocker(job, observed, missing) if missing else None
    if team.quota is not None:
        requeue(result, gangs.QUOTA_RECHECK_SECONDS)
    elif missing and not team.ready:
        result.actions += team.actions
    else:
        if missing and has_mpi_launcher(job):
            result.actions.append(CreateChild(desired_mpi_key_secret(job)))  # AlreadyExists keeps the first key
        restricted = observed.namespace_restricted
        result.actions += [
            CreateChild(
                desired_worker_pod(
                    job, r.index, attempt, config, gang.spec.pod_hash, restricted, r.role, team.membership
                )
            )
            for r in missing
        ]
    if missing and job.status.attempt_start_time is None:
        return Changes({"attempt_start_time": now})
    return Changes()


def check_timeouts(
    job: TrainingJob, outcome: Outcome, now: datetime.datetime, changes: Changes, result: Plan
) -> Outcome | None:
    """activeDeadlineSeconds (from the first start, suspended time excluded) and startupTimeoutSeconds."""
    spec = job.spec
    suspended = changes.fields.get("suspended_seconds", job.status.suspended_seconds) or 0
    deadline_left = policies.remaining(
        spec.active_deadline_seconds, policies.active_seconds(job.status.start_time, suspended, now)
    )
    if deadline_left is not None and deadline_left <= 0:
        return Outcome(
            Phase.FAILED, "DeadlineExceeded", f"activeDeadlineSeconds {spec.active_deadline_seconds} reached"
        )
    waiting = outcome.phase.waiting
    attempt_start = whole_seconds(changes.fields.get("attempt_start_time") or job.status.attempt_start_time)
    startup_left = policies.remaining(spec.startup_timeout_seconds, policies.seconds_between(attempt_start, now))
    if waiting and startup_left is not None and startup_left <= 0:
        return Outcome(
            Phase.FAILED,
            "StartupTimeout",
            f"workers not all running after startupTimeoutSeconds {spec.startup_timeout_seconds}: {outcome.message}",
        )
    for left in (deadline_left, startup_left if waiting else None):
        requeue(result, left)
    return None


def fail(
    job: TrainingJob, gang: Gang, outcome: Outcome, now: datetime.datetime, result: Plan, changes: Changes
) -> None:
    fields: dict[str, Any] = {"next_restart_time": None}
    failed = next((p for p in gang.current.values() if p.phase == "Failed" and not p.disrupted), None)
    if failed is not None and outcome.reason not in ("DeadlineExceeded", "StartupTimeout"):
        fields["last_failure"] = failure_record(failed, now)
        if outcome.reason != "WorkerFailed":  # e.g. BackoffLimitExceeded: still say which worker failed, and how
            result.events += worker_failed_events([failed])
    changes = changes + Changes(fields)
    result.status = build_status(job, outcome, gang.current, counters(job, changes.counters), now, changes.fields)
    result.events.append(Event("Warning", outcome.reason, outcome.message))


TRANSITION_EVENTS = {Phase.RUNNING: ("Normal", "TrainingStarted"), Phase.SUCCEEDED: ("Normal", "TrainingSucceeded")}


def add_transition_events(job: TrainingJob, outcome: Outcome, events: list[Event]) -> None:
    previous = job.status.phase
    if outcome.phase is previous or outcome.phase not in TRANSITION_EVENTS:
        return
    event_type, reason = TRANSITION_EVENTS[outcome.phase]
    if outcome.phase is Phase.RUNNING and job.status.start_time is not None:
        reason = "TrainingResumed"  # running again after a restart or a suspension
    events.append(Event(event_type, reason, outcome.message))
