"""Whether a running gang restarts, and why: worker failures (by policy), disruptions, and spec changes; and what
a decided restart or failure records.

Pure decisions over the gang as the caches show it: a restart deletes the pods it replaces and records why in the
same status write (workers.py adds it to the plan).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.replicas import Replica, is_desired, replica_order
from trainingjob.api.status import Counters, Phase, WorkerSpec
from trainingjob.api.times import format_time
from trainingjob.api.types import JobSpec, TrainingJob
from trainingjob.kube.phases import POD_ACTIVE, PodPhase
from trainingjob.planning.actions import Event, delete_pods
from trainingjob.progress.report import without_pace
from trainingjob.reconcile import policies
from trainingjob.reconcile.decision import Changes, Decision, Summary
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.roles import failure_detail, restarts_alone, tolerated
from trainingjob.reconcile.status import Outcome, failure_message
from trainingjob.reconcile.stops import stop_begun


@dataclass
class Gang:
    """The job's live pods split by whether they were built from the spec in force (`spec`)."""

    current: dict[Replica, PodView]
    stale: list[PodView]
    live: list[PodView]
    spec: WorkerSpec
    # Pods a recorded restart replaces that are not deleted yet: counted already, only to be deleted.
    replaced: list[PodView] = field(default_factory=list)
    # Pods being deleted or gone marked DisruptionTarget, by name: how a worker that went last looked (e.g. preempted
    # by the scheduler).
    leaving: dict[str, PodView] = field(default_factory=dict)

    @property
    def ignored(self) -> set[Replica]:
        """Current pods that failed and stay so (their failure ignored by policy, or one the job outlives)."""
        return {r for r, p in self.current.items() if p.phase == PodPhase.FAILED and not p.disrupted}


@dataclass
class Restart:
    """A decided restart: why, which pods go, and how the counters move."""

    reason: str
    message: str
    replace: list[PodView]
    counter_changes: Counters = field(default_factory=Counters)
    delay_seconds: int = 0
    failure: PodView | None = None
    # Every failed worker behind this restart: each gets its own WorkerFailed event.
    failed: tuple[PodView, ...] = ()


def decide(job: TrainingJob, gang: Gang, started: bool) -> Restart | Outcome | None:
    """Failures first (they may end the job), then disruptions, then spec changes. A failure the job outlives (an
    evaluator's, reconcile/roles.py) is restarted while the policy allows and left Failed otherwise."""
    failed = sorted(
        (p for p in gang.current.values() if p.phase == PodPhase.FAILED and not p.disrupted),
        key=lambda p: replica_order(p.replica),
    )
    restart_for_failure: list[PodView] = []
    for pod in failed:
        decision = policies.decide_failure(job.spec, pod)
        if decision.action == "Fail" and not tolerated(job.spec, pod):
            return Outcome(Phase.FAILED, decision.reason, described(job.spec, pod))
        if decision.action == "Restart":
            restart_for_failure.append(pod)
    if restart_for_failure:
        restart = failure_restart(job, gang, restart_for_failure)
        if restart is not None:
            return restart
    disrupted = disruption(job, gang, started)
    if disrupted is not None:
        return disrupted
    if started and gang.stale and any(p.spec_hash != gang.spec.pod_hash for p in gang.live):
        return Restart(
            "SpecChanged", "the spec changed; restarting all workers with the new spec", gang.live, Counters(attempt=1)
        )
    return None


def failure_restart(job: TrainingJob, gang: Gang, failed: list[PodView]) -> Restart | Outcome | None:
    """The restart for these failures; BackoffLimitExceeded once the limit is reached (None when every failure is
    one the job outlives: those pods stay Failed)."""
    restarts = job.status.moved.restart_count
    first = next((p for p in failed if not tolerated(job.spec, p)), failed[0])
    if policies.backoff_limit_reached(job.spec, restarts):
        if all(tolerated(job.spec, p) for p in failed):
            return None
        return Outcome(
            Phase.FAILED,
            "BackoffLimitExceeded",
            f"{described(job.spec, first)}; backoffLimit {job.spec.backoff_limit} reached",
        )
    delay = policies.backoff_seconds(job.spec, restarts + 1)
    message = f"{described(job.spec, first)}; restart {restarts + 1}/{job.spec.backoff_limit} in {delay}s"
    alone = all(restarts_alone(job.spec, p) for p in failed)
    replace = failed if alone else gang.live
    return Restart("WorkerFailed", message, replace, Counters(attempt=1, restart_count=1), delay, first, tuple(failed))


PREEMPTED = "PreemptionByScheduler"


def disruption_message(pod: PodView, fallback: str) -> str:
    """How a disrupted pod went: the DisruptionTarget condition says it best (preemption, eviction, taint)."""
    who = f"{pod.role} {pod.index} (pod {pod.name})"
    if pod.disruption_reason == PREEMPTED:
        return f"{who} was preempted by the scheduler for a higher-priority pod ({PREEMPTED})"
    if pod.disruption_reason:
        detail = f": {pod.disruption_message}" if pod.disruption_message else ""
        return f"{who} was disrupted ({pod.disruption_reason}{detail})"
    return f"{who} {fallback}"


def _replaced_with(job: TrainingJob, gang: Gang, pod: PodView, alone: list[PodView]) -> list[PodView]:
    """What a disruption of `pod` replaces: `alone` when it restarts alone, else every live pod of the gang."""
    return alone if restarts_alone(job.spec, pod) else gang.live


def disruption(job: TrainingJob, gang: Gang, started: bool) -> Restart | None:
    """An evicted/preempted pod, or one deleted by someone else after training started: always retried.

    A pod marked DisruptionTarget (preempted by the scheduler, evicted) is going: unless it restarts alone
    (reconcile/roles.py: restartStrategy Worker, an evaluator, an elastic worker other than 0), its gang restarts
    now, so the whole gang's resources go back together instead of the rest holding them for a gang that cannot run.
    """
    counted = Counters(attempt=1, disruption_count=1)
    disrupted = next((p for p in gang.current.values() if p.disrupted and p.phase == PodPhase.FAILED), None)
    if disrupted is not None:
        message = disruption_message(disrupted, f"was disrupted ({disrupted.reason or 'evicted'})")
        return Restart("WorkerDisrupted", message, _replaced_with(job, gang, disrupted, [disrupted]), counted)
    going = next((p for p in gang.current.values() if p.disruption_reason and p.active), None)
    if going is not None:
        return Restart(
            "WorkerDisrupted", disruption_message(going, ""), _replaced_with(job, gang, going, [going]), counted
        )
    if not started:
        return None
    present = {p.name for p in gang.live}
    for worker in job.status.worker_statuses or ():
        name, role = worker.get("podName"), worker.get("role") or k.WORKER
        replica = Replica(role, worker.get("workerId", 0))
        if worker.get("phase") in POD_ACTIVE and name not in present and is_desired(job.spec, replica):
            leaving = gang.leaving.get(name) or PodView(name or "", replica.index, -1, "", "", role=role)
            return Restart(
                "WorkerDisrupted",
                disruption_message(leaving, "was deleted"),
                _replaced_with(job, gang, leaving, []),
                counted,
            )
    return None


def failure_record(pod: PodView, now: datetime.datetime) -> dict:
    """status.lastFailure: which worker failed, how, and when."""
    optional = {"exitCode": pod.exit_code, "reason": pod.reason, "message": pod.message}
    return {
        "workerId": pod.index,
        **({"role": pod.role} if pod.role != k.WORKER else {}),
        "podName": pod.name,
        "time": format_time(now),
        **{key: value for key, value in optional.items() if value is not None},
    }


def described(spec: JobSpec, pod: PodView) -> str:
    """A failed pod's message, with what its framework can tell of why (e.g. which MPI rank)."""
    return failure_message(pod, failure_detail(spec, pod))


def worker_failed_events(spec: JobSpec, pods: Iterable[PodView]) -> list[Event]:
    """One WorkerFailed Warning per failed worker (index, exit code, reason in the message).

    Emitted only from the plan that acts on the failure (a restart records the pod in replacedPods, a failure ends
    the job), so each failure gives one event, not one per reconcile.
    """
    return [Event("Warning", "WorkerFailed", described(spec, pod)) for pod in pods]


def restarting(job: TrainingJob, gang: Gang, restart: Restart, now: datetime.datetime, so_far: Decision) -> Decision:
    """Record the restart and delete the pods it replaces; new pods come once names are free and the delay is over.
    The stop it starts is status.lastStop; the pace goes (the next attempt measures its own)."""
    next_time = now + datetime.timedelta(seconds=restart.delay_seconds) if restart.delay_seconds else None
    fields: dict[str, Any] = {"next_restart_time": next_time, "attempt_start_time": None}
    if restart.failure is not None:
        fields["last_failure"] = failure_record(restart.failure, now)
    stop = stop_begun(restart.reason, format_time(now), restart.replace)
    if stop is not None:
        fields["last_stop"] = stop
    fields["progress"] = without_pace(job.status.progress)
    replaced_uids = (*(so_far.changes.fields.get("replaced_pods") or ()), *(p.uid for p in restart.replace if p.uid))
    fields["replaced_pods"] = replaced_uids or None
    replaced = {p.name for p in restart.replace}
    survivors = {i: p for i, p in gang.current.items() if p.name not in replaced}
    announced = Event("Normal" if restart.reason == "SpecChanged" else "Warning", "Restarting", restart.message)
    return Decision(
        actions=tuple(delete_pods(restart.replace)),
        events=(*worker_failed_events(job.spec, restart.failed), announced),
        changes=Changes(fields, restart.counter_changes),
        requeue_after=restart.delay_seconds or None,
        summary=Summary(Outcome(Phase.RESTARTING, restart.reason, restart.message), survivors),
    )


def failed(job: TrainingJob, gang: Gang, outcome: Outcome, now: datetime.datetime) -> Decision:
    """The job fails: say which worker failed and how, unless time ran out."""
    fields: dict[str, Any] = {"next_restart_time": None}
    events: list[Event] = []
    worker = next((p for p in gang.current.values() if p.phase == PodPhase.FAILED and not p.disrupted), None)
    if worker is not None and outcome.reason not in ("DeadlineExceeded", "StartupTimeout"):
        fields["last_failure"] = failure_record(worker, now)
        if outcome.reason != "WorkerFailed":  # e.g. BackoffLimitExceeded: still say which worker failed, and how
            events += worker_failed_events(job.spec, [worker])
    events.append(Event("Warning", outcome.reason, outcome.message))
    return Decision(events=tuple(events), changes=Changes(fields), summary=Summary(outcome, gang.current))
