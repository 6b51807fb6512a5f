"""Whether a running gang restarts, and why: worker failures (by policy), disruptions, and spec changes.

Pure decisions over the gang as the caches show it; workers.py records a decided restart and deletes its pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from trainingjob.api.types import TrainingJob
from trainingjob.reconcile import policies
from trainingjob.reconcile.actions import Event
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.spec_version import WorkerSpec
from trainingjob.reconcile.status import Outcome, failure_message


@dataclass
class Gang:
    """The job's live workers split by whether they were built from the spec in force (`spec`)."""

    current: dict[int, PodView]
    stale: list[PodView]
    live: list[PodView]
    spec: WorkerSpec
    # Pods a recorded restart replaces that are not deleted yet: counted already, only to be deleted.
    replaced: list[PodView] = field(default_factory=list)
    # Pods being deleted, by name: what a worker that went last looked like (e.g. preempted by the scheduler).
    leaving: dict[str, PodView] = field(default_factory=dict)


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


def decide(job: TrainingJob, gang: Gang, started: bool) -> Restart | Outcome | None:
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
    if started and gang.stale and any(p.spec_hash != gang.spec.pod_hash for p in gang.live):
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


PREEMPTED = "PreemptionByScheduler"


def disruption_message(pod: PodView, fallback: str) -> str:
    """How a disrupted worker went: the DisruptionTarget condition says it best (preemption, eviction, taint)."""
    who = f"worker {pod.index} (pod {pod.name})"
    if pod.disruption_reason == PREEMPTED:
        return f"{who} was preempted by the scheduler for a higher-priority pod ({PREEMPTED})"
    if pod.disruption_reason:
        detail = f": {pod.disruption_message}" if pod.disruption_message else ""
        return f"{who} was disrupted ({pod.disruption_reason}{detail})"
    return f"{who} {fallback}"


def disruption(job: TrainingJob, gang: Gang, started: bool) -> Restart | None:
    """An evicted/preempted worker, or one deleted by someone else after training started: always retried.

    A worker marked DisruptionTarget (preempted by the scheduler, evicted) is going: its gang restarts now, so
    the whole gang's resources go back together instead of the rest holding them for a gang that cannot run."""
    gang_wide = job.spec.failure_policy.restart_strategy == "Gang"
    counted = {"attempt": 1, "disruptionCount": 1}
    disrupted = next((p for p in gang.current.values() if p.disrupted and p.phase == "Failed"), None)
    if disrupted is not None:
        message = disruption_message(disrupted, f"was disrupted ({disrupted.reason or 'evicted'})")
        return Restart("WorkerDisrupted", message, gang.live if gang_wide else [disrupted], counted)
    going = next((p for p in gang.current.values() if p.disruption_reason and p.active), None)
    if going is not None:
        return Restart("WorkerDisrupted", disruption_message(going, ""), gang.live if gang_wide else [going], counted)
    if not started:
        return None
    present = {p.name for p in gang.live}
    for worker in job.status.get("workerStatuses") or []:
        name, index = worker.get("podName"), worker.get("workerId", 0)
        if worker.get("phase") in ("Pending", "Running") and name not in present and index < job.spec.workers:
            leaving = gang.leaving.get(name) or PodView(
                name=name or "", index=index, attempt=-1, spec_hash="", phase=""
            )
            return Restart(
                "WorkerDisrupted", disruption_message(leaving, "was deleted"), gang.live if gang_wide else [], counted
            )
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
