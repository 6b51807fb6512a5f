"""A job in Kueue's hands: held while it is queued, run with the admission's placement, as the queue planner
(queueing/planner.py) decided.

Held is the suspend path: no workers (an evicted job's are deleted), its Service, ConfigMap and checkpoint volume
stay, and the deadline clock stops (suspendTime), so re-admission starts a new attempt from the newest checkpoint,
as a resume does; one after an eviction counts as a disruption (workers.resume_changes), not a failure.
"""

from __future__ import annotations

import dataclasses
import datetime

from trainingjob.api.status import Phase
from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.planning.actions import Event, delete_pods
from trainingjob.progress.report import without_pace
from trainingjob.queueing.planner import QueueDecision
from trainingjob.reconcile.decision import Changes, Decision, Summary
from trainingjob.reconcile.gangs import release_gangs
from trainingjob.reconcile.observed import ObservedChildren
from trainingjob.reconcile.status import Outcome
from trainingjob.reconcile.stops import report_changes, stop_begun

EVICTION_REASONS = ("Preempted", "Evicted")
# Kueue's API not served: look again now and then (installing Kueue makes no event on the job).
NOT_INSTALLED_RECHECK_SECONDS = 30.0


def was_evicted(job: TrainingJob) -> bool:
    """The job's last wait began with Kueue evicting its running workers (status.queue.reason)."""
    reason = str((job.status.queue or {}).get("reason") or "")
    return reason.startswith(EVICTION_REASONS)


def queue_events(gate: QueueDecision) -> tuple[Event, ...]:
    return tuple(Event(e.type, e.reason, e.message) for e in gate.events)


def stop_workers(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, reason: str) -> Decision:
    """The suspend path, for spec.suspend and for Kueue's hold alike: no workers (deleted with their grace period)
    and no gang; everything else stays. The deadline clock stops (suspendTime). The stop is status.lastStop, with
    `reason` (Suspended, or Kueue's: Preempted, Evicted<why>), and what the stopping workers report goes into
    lastCheckpoint and lastStop (the checkpoint saved on the way out) but not progress: status.progress stays where
    the job was stopped (a sweep judges a pruned trial by it)."""
    changes = {
        "suspend_time": job.status.suspend_time or now,
        "next_restart_time": None,
        "attempt_start_time": None,
        "gang": None,
        "progress": without_pace(job.status.progress),
    }
    stopping = job.status.phase not in (Phase.SUSPENDED, Phase.QUEUED)
    if stopping and (stop := stop_begun(reason, format_time(now), observed.pods)) is not None:
        changes["last_stop"] = stop
    decision = Decision(
        actions=(*delete_pods(p for p in observed.pods if p.live), *release_gangs(job, observed)),
        changes=Changes(changes),
    )
    reported = report_changes(job, observed.progress, decision).fields
    return decision + Decision(changes=Changes({key: v for key, v in reported.items() if key != "progress"}))


def plan_queued(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, gate: QueueDecision) -> Decision:
    """Phase Queued with Kueue's reason: the workers are stopped (an evicted job's) and wait for admission. The
    stop's reason is the hold's, the Queued condition's (Preempted, Evicted<why>), not "Suspended": a user asks
    why the job stopped, and Kueue's answer is the true one."""
    assert gate.hold is not None
    return stop_workers(job, observed, now, gate.hold.reason) + Decision(
        events=queue_events(gate),
        changes=Changes({"queue": gate.status}),
        summary=Summary(Outcome(Phase.QUEUED, gate.hold.reason, gate.hold.message)),
        requeue_after=NOT_INSTALLED_RECHECK_SECONDS if gate.hold.reason == "KueueNotInstalled" else None,
    )


def admitted_job(job: TrainingJob, gate: QueueDecision | None) -> TrainingJob:
    """`job` as Kueue admitted it: an elastic job admitted partially runs with the workers admitted (fewer than
    spec.workers, at least elastic.minWorkers: torchrun's agents take any count in that range), as if it had been
    scaled to them; every other job as it is. The spec's worker count is left out of an elastic job's pod template
    hash, so the workers already running are not restarted by the difference."""
    admitted = gate.admitted_workers if gate is not None and gate.hold is None else None
    if admitted is None or job.spec.elastic is None or admitted >= job.spec.workers:
        return job
    spec = dataclasses.replace(job.spec, workers=admitted)
    return dataclasses.replace(job, spec=spec, raw_spec={**job.raw_spec, "workers": admitted})


def queue_notes(gate: QueueDecision | None) -> Decision:
    """An admitted (or finished) job's status.queue and the admission's events."""
    if gate is None or gate.status is None:
        return Decision()
    return Decision(events=queue_events(gate), changes=Changes({"queue": gate.status}))
