"""Planning the worker gang of a running job: create, restart (failures, disruptions, spec changes), time out,
and say what keeps the workers from running (blockers.py).

Every restart bumps `status.attempt` in the same status write that records why (restartCount, disruptionCount,
lastFailure, nextRestartTime); that write carries a resourceVersion precondition, so a restart is recorded
exactly once even when plans race with a stale cache. The same write lists the uids of the pods the restart
replaces (`status.replacedPods`): the pods are deleted after it, and until they are gone they are only deleted
again, never decided on again, so a failed delete cannot count one failure twice. Waiting for a backoff delay is
a requeue, never a sleep.

Each step returns a Decision (reconcile/decision.py); plan_workers adds them up and the planner builds the status
once from the sum. A step that needs what was decided before it (the attempt a resume starts, the pods a restart
already replaces) reads the sum so far.
"""

from __future__ import annotations

import datetime

from trainingjob.api.names import pod_name
from trainingjob.api.replicas import Replica, desired_replicas, is_desired
from trainingjob.api.status import Counters, Phase
from trainingjob.api.times import whole_seconds
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod, framework_children
from trainingjob.config import OperatorConfig
from trainingjob.planning.actions import CreateChild, Event, delete_pods
from trainingjob.reconcile import blockers, gangs, policies
from trainingjob.reconcile.decision import Changes, Decision, Summary
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.queued import was_evicted
from trainingjob.reconcile.restarts import Gang, decide, failed, restarting
from trainingjob.reconcile.spec_version import current_worker_spec
from trainingjob.reconcile.status import Outcome, pods_outcome
from trainingjob.reconcile.stops import resume_source


def observe_gang(job: TrainingJob, observed: ObservedChildren) -> Gang:
    recorded = set(job.status.replaced_pods or ())
    if resume_starts_attempt(job):
        # Workers the suspension did not delete are from the attempt before: replaced like a restart's, never kept
        # under the new attempt's number. (An operator SIGKILLed between the suspend's status write and its deletes,
        # or a delete that failed, and spec.suspend set back to false before the next reconcile: the status said
        # attempt 1, "recreating the workers from the last checkpoint", while the attempt-0 pods ran on.)
        recorded |= {p.uid for p in observed.pods if p.live and p.uid}
    replaced = [p for p in observed.pods if p.live and p.uid in recorded]
    live = [p for p in observed.pods if p.live and p.uid not in observed.released_pods and p.uid not in recorded]
    spec = current_worker_spec(job, live)
    current = {p.replica: p for p in live if p.spec_hash == spec.pod_hash and is_desired(job.spec, p.replica)}
    stale = [p for p in live if current.get(p.replica) is not p]
    leaving = {**observed.departed_pods, **{p.name: p for p in observed.pods if p.deleting}}
    return Gang(current, stale, live, spec, replaced, leaving)


def plan_workers(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig
) -> Decision:
    gang = observe_gang(job, observed)
    opening = opening_decision(job, observed, gang, now)
    verdict = decide(job, gang, started=job.status.start_time is not None)
    if isinstance(verdict, Outcome):
        return opening + failed(job, gang, verdict, now)
    if verdict is not None:
        return opening + restarting(job, gang, verdict, now, opening)
    return opening + run_gang(job, observed, gang, now, config, opening)


def opening_decision(job: TrainingJob, observed: ObservedChildren, gang: Gang, now: datetime.datetime) -> Decision:
    """What every plan of a running job records: a resume, the pods still to delete, the spec."""
    resumed = resume_changes(job, now)
    pending = Changes({"replaced_pods": tuple(p.uid for p in gang.replaced) or None, "worker_spec": gang.spec})
    return Decision(
        actions=tuple(delete_pods(p for p in gang.replaced if p.uid not in observed.released_pods)),
        events=(resume_event(job),) if resumed.fields else (),
        changes=resumed + pending,
    )


def resume_changes(job: TrainingJob, now: datetime.datetime) -> Changes:
    """Coming back from suspension: if training had begun, add the pause up and start a new attempt.

    activeDeadlineSeconds counts from startTime, so only a pause after it may be taken off; time queued before
    the first start (created suspended, e.g. by Kueue) was never counted and must not extend the deadline.
    """
    suspended_at = job.status.suspend_time
    if suspended_at is None:
        return Changes()
    if not resume_starts_attempt(job):
        return Changes({"suspend_time": None})
    paused = int((whole_seconds(now) - suspended_at).total_seconds())
    fields = {"suspend_time": None, "suspended_seconds": (job.status.suspended_seconds or 0) + paused}
    # Back after Kueue evicted the workers (preempted, queue stopped): a disruption, like a node lost.
    return Changes(fields, Counters(attempt=1, disruption_count=1 if was_evicted(job) else 0))


def resume_starts_attempt(job: TrainingJob) -> bool:
    """A job whose status says suspended, planned as running: spec.suspend is false again. Only a job whose training
    had begun starts a new attempt (one created suspended, queued, starts its first)."""
    return job.status.suspend_time is not None and job.status.start_time is not None


def resume_event(job: TrainingJob) -> Event:
    """Every resume says so, the pair of `Suspended`, and what the workers resume from (status.lastStop): a job
    created suspended (queued) has no TrainingResumed to come, it will be TrainingStarted."""
    why = "admitted by Kueue" if job.status.queue and not job.spec.suspend else "spec.suspend is false"
    if job.status.start_time is not None:
        source = resume_source(job.status.last_stop, job.status.last_checkpoint)
        return Event("Normal", "Resumed", f"{why}: recreating the workers, {source}")
    return Event("Normal", "Resumed", f"{why}: creating the workers")


def run_gang(
    job: TrainingJob,
    observed: ObservedChildren,
    gang: Gang,
    now: datetime.datetime,
    config: OperatorConfig,
    so_far: Decision,
) -> Decision:
    """No restart is due: create what is missing, and say what keeps the rest from running."""
    retry_at = admission_retry_time(job, observed)
    team = gangs.plan_gang(job, observed, gang.current, so_far.counters(job).attempt)
    decision = Decision(actions=tuple(delete_pods(gang.stale)))
    decision += create_missing(job, observed, gang, now, config, so_far, retry_at, team)
    decision += Decision(actions=tuple(gangs.release_gangs(job, observed, keep=[team.name])))
    current = dict(gang.current)
    outcome = pods_outcome(job, current, job.status.phase is Phase.RESTARTING, gang.ignored)
    if outcome.phase.waiting:
        if observed.admission is not None and retry_at is not None and retry_at > now:
            decision += release_gang(current, so_far + decision, retry_at)
            current = {r: p for r, p in current.items() if not p.active}
            outcome = pods_outcome(job, current, job.status.phase is Phase.RESTARTING, gang.ignored)
        found = team.blockers + blockers.find_blockers(
            job, current, observed, now, config.stuck_after_seconds, config.force_delete_after_seconds
        )
    else:  # all running as far as the pods' phases say; a lost node may say otherwise
        found = blockers.lost_node_blockers(current, observed.nodes)
    outcome = Outcome(outcome.phase, outcome.reason, outcome.message + blockers.blocked_summary(found))
    record = gangs.gang_record(job, team, observed, current)
    decision += Decision(events=tuple(gangs.gang_events(job, record)), changes=Changes({"gang": record}))
    decision += force_delete_stuck(observed, now, config)
    timed_out, waits = check_timeouts(job, outcome, now, so_far + decision)
    decision += waits
    if timed_out is not None:
        return decision + failed(job, gang, timed_out, now)
    return decision + running(job, observed, outcome, current, found, now, config)


def running(
    job: TrainingJob,
    observed: ObservedChildren,
    outcome: Outcome,
    current: dict[Replica, PodView],
    found: list[blockers.Blocker],
    now: datetime.datetime,
    config: OperatorConfig,
) -> Decision:
    """The phase of a gang that runs or waits to: its summary, what blocks it, the events of its transitions."""
    blocked, blocked_events = blocked_condition(job, found)
    refused = refused_workers(job, observed, current) if outcome.phase.waiting else {}
    started = Changes({"next_restart_time": None}) if outcome.phase is Phase.RUNNING else Changes()
    return Decision(
        events=blocked_events + transition_events(job, outcome),
        changes=started,
        requeue_after=blockers.next_check(
            observed, job, now, config.stuck_after_seconds, config.force_delete_after_seconds
        ),
        summary=Summary(outcome, current, blocked, refused),
    )


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


def release_gang(current: dict[Replica, PodView], so_far: Decision, retry_at: datetime.datetime) -> Decision:
    """A gang that admission will not let complete gives back what it holds (GPUs, quota) until the retry: its
    unfinished pods are deleted, recorded in replacedPods so their going is neither a failure nor a disruption."""
    released = [p for p in current.values() if p.active]
    uids = (*(so_far.changes.fields.get("replaced_pods") or ()), *(p.uid for p in released if p.uid))
    return Decision(
        actions=tuple(delete_pods(released)),
        changes=Changes({"replaced_pods": uids or None, "next_restart_time": retry_at}),
    )


def force_delete_stuck(observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig) -> Decision:
    """The stuck-pod policy: a pod whose node is lost, Terminating past its grace period by force_delete_after."""
    pods = blockers.force_deletions(observed.pods, observed.nodes, now, config.force_delete_after_seconds)
    events = (
        Event(
            "Warning",
            "PodForceDeleted",
            f"{blockers.subject(pod)} was force-deleted: {observed.nodes[pod.node_name or ''].describe()}",
        )
        for pod in pods
    )
    return Decision(actions=tuple(delete_pods(pods, force=True)), events=tuple(events))


def blocked_condition(job: TrainingJob, found: list[blockers.Blocker]) -> tuple[tuple[str, str] | None, tuple]:
    """The Blocked condition's (reason, message) for the first blocker, and a Warning Event when it is news."""
    if not found:
        return None, ()
    previous = job.status.condition(blockers.BLOCKED)
    reason, message = blockers.blocked_condition(previous, found[0])
    event = blockers.blocked_event(previous, reason, message)
    return (reason, message), (() if event is None else (event,))


def create_missing(
    job: TrainingJob,
    observed: ObservedChildren,
    gang: Gang,
    now: datetime.datetime,
    config: OperatorConfig,
    so_far: Decision,
    retry_at: datetime.datetime | None,
    team: gangs.GangPlan,
) -> Decision:
    """Create workers whose names are free, unless a restart's backoff delay or an admission retry is pending; a
    gang's object comes first, and its workers once the cache shows it (`team`, see gangs.py); the children the
    job's framework adds (frameworks/base.py) come with them."""
    waits = [t for t in (job.status.next_restart_time, retry_at) if t is not None and t > now]
    if waits:
        return Decision(requeue_after=(max(waits) - now).total_seconds())
    taken = {p.name for p in observed.pods} | observed.claimed_pods
    admitted = observed.queue.placement if observed.queue is not None else {}  # Kueue's flavors' placement
    missing = [r for r in desired_replicas(job.spec) if pod_name(job.name, r.role, r.index) not in taken]
    team.quota = gangs.quota_blocker(job, observed, missing) if missing else None
    started = Changes({"attempt_start_time": now}) if missing and job.status.attempt_start_time is None else Changes()
    if team.quota is not None:
        return Decision(changes=started, requeue_after=gangs.QUOTA_RECHECK_SECONDS)
    if missing and not team.ready:
        return Decision(actions=tuple(team.actions), changes=started)
    attempt, restricted = so_far.counters(job).attempt, observed.namespace_restricted
    pods = [
        desired_worker_pod(
            job, r.index, attempt, config, gang.spec.pod_hash, restricted, r.role, team.membership, admitted.get(r.role)
        )
        for r in missing
    ]
    children = framework_children(job) if missing else []  # AlreadyExists keeps the first ones
    return Decision(actions=tuple(CreateChild(manifest) for manifest in [*children, *pods]), changes=started)


def check_timeouts(
    job: TrainingJob, outcome: Outcome, now: datetime.datetime, so_far: Decision
) -> tuple[Outcome | None, Decision]:
    """activeDeadlineSeconds (from the first start, suspended time excluded) and startupTimeoutSeconds: the
    outcome that ends the job, or when to look again."""
    spec, fields = job.spec, so_far.changes.fields
    suspended = fields.get("suspended_seconds", job.status.suspended_seconds) or 0
    deadline_left = policies.remaining(
        spec.active_deadline_seconds, policies.active_seconds(job.status.start_time, suspended, now)
    )
    if deadline_left is not None and deadline_left <= 0:
        message = f"activeDeadlineSeconds {spec.active_deadline_seconds} reached"
        return Outcome(Phase.FAILED, "DeadlineExceeded", message), Decision()
    waiting = outcome.phase.waiting
    attempt_start = whole_seconds(fields.get("attempt_start_time") or job.status.attempt_start_time)
    startup_left = policies.remaining(spec.startup_timeout_seconds, policies.seconds_between(attempt_start, now))
    if waiting and startup_left is not None and startup_left <= 0:
        message = f"workers not all running after startupTimeoutSeconds {spec.startup_timeout_seconds}: "
        return Outcome(Phase.FAILED, "StartupTimeout", message + outcome.message), Decision()
    waits = Decision(requeue_after=deadline_left) + Decision(requeue_after=startup_left if waiting else None)
    return None, waits


TRANSITION_EVENTS = {Phase.RUNNING: ("Normal", "TrainingStarted"), Phase.SUCCEEDED: ("Normal", "TrainingSucceeded")}


def transition_events(job: TrainingJob, outcome: Outcome) -> tuple[Event, ...]:
    previous = job.status.phase
    if outcome.phase is previous or outcome.phase not in TRANSITION_EVENTS:
        return ()
    event_type, reason = TRANSITION_EVENTS[outcome.phase]
    if outcome.phase is Phase.RUNNING and job.status.start_time is not None:
        reason = "TrainingResumed"  # running again after a restart or a suspension
    return (Event(event_type, reason, outcome.message),)
