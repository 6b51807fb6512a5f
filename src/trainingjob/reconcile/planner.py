"""The pure planner: (job, observed children, now, what the operator remembers) -> JobPlan (reconcile/plan.py: the
shared Plan's actions, status, events and requeue_after, with the progress report and whether details are held).

Level-triggered: it looks only at what is (the job, the cached children, the clock) and never at what happened,
so calling it twice, late, or after an operator restart gives the same answer. Each step returns a Decision
(reconcile/decision.py); plan() adds them up, builds the status once, and makes the last decisions about the
whole status: which progress report it carries, whether a change of worker details alone waits, the MLflow link.
This module handles the job-level states (deleting, finished, invalid, suspended, queued in Kueue: queued.py)
and the shared children;
`workers.py` plans the worker gang.
"""

from __future__ import annotations

import datetime

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name
from trainingjob.api.status import JobStatus, Phase
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_data, desired_config_map
from trainingjob.builders.pvc import desired_checkpoint_pvc
from trainingjob.builders.service import desired_service, service_ports
from trainingjob.builders.tracking import link_run
from trainingjob.config import OperatorConfig
from trainingjob.planning.actions import (
    AddFinalizer,
    CreateChild,
    DeleteChild,
    DeleteJob,
    Event,
    RemoveFinalizer,
    ReplaceChild,
    delete_pods,
)
from trainingjob.reconcile.decision import Decision, Summary
from trainingjob.reconcile.endpoints import plan_endpoints
from trainingjob.reconcile.finished import finished_worker_details
from trainingjob.reconcile.gangs import release_gangs
from trainingjob.reconcile.inputs import PlanInputs
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.plan import JobPlan
from trainingjob.reconcile.queued import admitted_job, plan_queued, queue_notes, stop_workers
from trainingjob.reconcile.resources import plan_resources
from trainingjob.reconcile.runtimes import RUNTIME_GRACE_SECONDS, Resolved, resolve_runtime
from trainingjob.reconcile.status import Outcome, hold_details
from trainingjob.reconcile.stops import report_changes
from trainingjob.reconcile.validation import spec_errors
from trainingjob.reconcile.workers import plan_workers

NOTHING_REMEMBERED = PlanInputs()


def plan(
    job: TrainingJob,
    observed: ObservedChildren,
    now: datetime.datetime,
    config: OperatorConfig,
    inputs: PlanInputs = NOTHING_REMEMBERED,
) -> JobPlan:
    decision, status = plan_job(job, observed, now, config, inputs)
    # A job that finishes consumes the newest report even when it is not due yet (its last progress).
    report = inputs.latest_progress if status.finished else observed.progress
    status, held = hold_details(job.status, status, inputs.details_held_for)
    status, look_again = link_run(job, status, inputs.mlflow_run, config.mlflow_tracking_uri, now)
    return JobPlan(
        actions=list(decision.actions),
        status=status,
        events=list(decision.events),
        requeue_after=Decision.soonest(Decision.soonest(decision.requeue_after, held), look_again),
        report=report,
        details_held=held is not None,
    )


def plan_job(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig, inputs: PlanInputs
) -> tuple[Decision, JobStatus]:
    """The decisions of the job's state, added up, and the status they give it."""
    if job.deleting:
        return plan_deletion(job, observed), job.status
    decision = Decision() if k.FINALIZER in job.finalizers else Decision(actions=(AddFinalizer(),))
    if job.status.finished:
        decision += Decision(changes=report_changes(job, inputs.latest_progress, decision))
        cleanup, status = plan_finished(job, observed, decision.status_of(job, now), now, decision)
        return decision + cleanup, status
    resolved = resolve_runtime(job, observed.runtime, now)
    job = resolved.job  # with a runtime: its effective spec, the runtime recorded in its status
    if resolved.waiting is not None:
        decision += waiting_for_runtime(resolved)
        return decision, decision.status_of(job, now)
    problems = [resolved.problem] if resolved.problem else []
    problems += spec_errors(job.spec) + list(observed.rejections)
    if problems:
        decision += plan_invalid(job, observed, "; ".join(problems))
        return decision, decision.status_of(job, now)
    decision += repair_shared_children(job, observed, config)
    gate = observed.queue
    if job.spec.suspend:
        decision += plan_suspended(job, observed, now) + queue_notes(gate)
        decision = plan_resources(job, observed, now, config, decision)
        return decision, decision.status_of(job, now)
    if gate is not None and gate.hold is not None:
        decision = plan_resources(job, observed, now, config, decision + plan_queued(job, observed, now, gate))
        return decision, decision.status_of(job, now)
    job = admitted_job(job, gate)  # an elastic job's workers as Kueue admitted them (partial admission)
    decision += queue_notes(gate) + plan_workers(job, observed, now, config)
    finishing = decision.summary is not None and decision.summary.outcome.phase.finished
    report = inputs.latest_progress if finishing else observed.progress
    decision += Decision(changes=report_changes(job, report, decision))
    decision = plan_resources(job, observed, now, config, decision)
    status = decision.status_of(job, now)
    if status.finished:
        cleanup, status = plan_finished(job, observed, status, now, decision)
        return decision + cleanup, status
    return decision + publish_endpoints(job, observed, now), status


def publish_endpoints(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime) -> Decision:
    """The Service's EndpointSlices (reconcile/endpoints.py), and a look again when a partial write waits."""
    writes, wait = plan_endpoints(job, observed, now)
    return Decision(actions=tuple(writes), requeue_after=wait)


def plan_deletion(job: TrainingJob, observed: ObservedChildren) -> Decision:
    """Delete the workers now (don't leave training running until GC gets there), then let the job go."""
    finalizer = (RemoveFinalizer(),) if k.FINALIZER in job.finalizers else ()
    return Decision(actions=(*delete_pods(p for p in observed.pods if p.live), *finalizer))


def pods_to_clean(job: TrainingJob, pods: list[PodView], succeeded: bool) -> list[PodView]:
    """cleanPodPolicy: All deletes every pod, Running (default) the unfinished ones, None none.

    Once the job has Succeeded, the pods still running have nothing left to do (the workers after successPolicy
    Rank0, parameter servers and an evaluator after the chief, MPI workers after the launcher), so they go in any
    case.
    """
    policy = job.spec.clean_pod_policy
    if policy == "All":
        return pods
    if policy == "Running" or succeeded:
        return [p for p in pods if p.active]
    return []


def plan_finished(
    job: TrainingJob, observed: ObservedChildren, status: JobStatus, now: datetime.datetime, so_far: Decision
) -> tuple[Decision, JobStatus]:
    """A finished job ignores spec changes; it only cleans up its pods (those `so_far` does not delete already)
    and, with a TTL, itself; its status's worker entries follow the pods cleanup removes (reconcile/finished.py).
    An edit of its spec is still observed (status.observedGeneration), so a client waiting for it does not wait
    forever: the status it reads is the answer to that spec (finished; a new ttlSecondsAfterFinished counts).

    The newest progress report is in its status (plan_job): the last one (100 %, the final checkpoint) often
    arrives within the progress write interval of the previous write, and is the one worth keeping.
    """
    live = [p for p in observed.pods if p.live and p.uid not in observed.released_pods]
    already = {a.name for a in so_far.actions if isinstance(a, DeleteChild)}
    cleanup = [
        *delete_pods(p for p in pods_to_clean(job, live, status.phase is Phase.SUCCEEDED) if p.name not in already),
        *(a for a in release_gangs(job, observed) if a.name not in already),
    ]
    deleting = {a.name for a in (*so_far.actions, *cleanup) if isinstance(a, DeleteChild) and a.kind == "Pod"}
    deleting |= {p.name for p in observed.pods if p.uid in observed.released_pods}
    status = status.replace(
        observed_generation=job.generation, **finished_worker_details(status, observed.pods, deleting)
    )
    ttl, finished_at = job.spec.ttl_seconds_after_finished, status.completion_time
    if ttl is None or finished_at is None:
        return Decision(actions=tuple(cleanup)), status
    left = (finished_at + datetime.timedelta(seconds=ttl) - now).total_seconds()
    if left > 0:
        return Decision(actions=tuple(cleanup), requeue_after=left), status
    expired = Event("Normal", "TTLExpired", f"deleting the job {ttl}s after it finished")
    return Decision(actions=(*cleanup, DeleteJob()), events=(expired,)), status


def plan_invalid(job: TrainingJob, observed: ObservedChildren, message: str) -> Decision:
    return Decision(
        actions=(*delete_pods(p for p in observed.pods if p.live), *release_gangs(job, observed)),
        events=(Event("Warning", "InvalidSpec", message),),
        summary=Summary(Outcome(Phase.FAILED, "InvalidSpec", message)),
    )


def repair_shared_children(job: TrainingJob, observed: ObservedChildren, config: OperatorConfig) -> Decision:
    """Create the Service, ConfigMap and checkpoint PVC when missing; bring the Service's ports and the ConfigMap's
    data in line with the spec when they differ."""
    actions: list = []
    events: list[Event] = []
    service = desired_service(job)
    if not observed.service_exists:
        actions.append(CreateChild(service))
    elif observed.service_ports is not None and observed.service_ports != service_ports(service["spec"]["ports"]):
        actions.append(ReplaceChild(service))
        events.append(Event("Normal", "ServiceUpdated", f"{service['metadata']['name']} ports follow the job's spec"))
    if observed.config_data is None:
        actions.append(CreateChild(desired_config_map(job, config)))
    elif dict(observed.config_data) != desired_config_data(job, config):
        actions.append(ReplaceChild(desired_config_map(job, config)))
        events.append(config_event(job))
    claim = desired_checkpoint_pvc(job)
    if claim is not None and claim["metadata"]["name"] not in observed.claims:
        actions.append(CreateChild(claim))
    return Decision(actions=tuple(actions), events=tuple(events))


def waiting_for_runtime(resolved: Resolved) -> Decision:
    """The runtime the job names is not in the cache yet: Pending and Blocked, looked at again when the runtime
    arrives (its watch wakes the job) or when the grace period is over."""
    grace = f"{RUNTIME_GRACE_SECONDS:g}s"
    message = f"waiting for {resolved.missing}: the job fails if it does not exist {grace} after it was created"
    outcome = Outcome(Phase.PENDING, "RuntimeNotFound", message)
    return Decision(requeue_after=resolved.waiting, summary=Summary(outcome, blocked=("RuntimeNotFound", message)))


def plan_suspended(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime) -> Decision:
    """No workers while suspended; everything else stays. The deadline clock stops (suspendTime)."""
    news = job.status.phase is not Phase.SUSPENDED
    return stop_workers(job, observed, now, "Suspended") + Decision(
        events=(Event("Normal", "Suspended", "workers deleted; set spec.suspend=false to resume"),) if news else (),
        summary=Summary(Outcome(Phase.SUSPENDED, "JobSuspended", "the job is suspended (spec.suspend)")),
    )


def config_event(job: TrainingJob) -> Event:
    """A spec the operator has not acted on yet explains a different ConfigMap; otherwise someone edited it."""
    name = config_map_name(job.name)
    if job.status.observed_generation != job.generation:
        return Event("Normal", "ConfigUpdated", f"updated {name} for generation {job.generation} of the spec")
    return Event("Normal", "ConfigRestored", f"restored {name} to the job's spec (it had been edited)")
