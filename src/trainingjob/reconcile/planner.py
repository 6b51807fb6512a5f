"""The pure planner: (job, observed children, now) -> Plan(actions, status, events, requeue_after).

Level-triggered: it looks only at what is (the job, the cached children, the clock) and never at what happened,
so calling it twice, late, or after an operator restart gives the same answer. This module handles the job-level
states (deleting, finished, invalid, suspended) and the shared children; `workers.py` plans the worker gang.
"""

from __future__ import annotations

import datetime

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name
from trainingjob.api.status import Phase
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_data, desired_config_map
from trainingjob.builders.pvc import desired_checkpoint_pvc
from trainingjob.builders.service import desired_service, service_ports
from trainingjob.config import OperatorConfig
from trainingjob.reconcile.actions import (
    AddFinalizer,
    CreateChild,
    DeleteChild,
    DeleteJob,
    Event,
    Plan,
    RemoveFinalizer,
    ReplaceChild,
)
from trainingjob.reconcile.endpoints import plan_endpoints
from trainingjob.reconcile.finished import finished_worker_details
from trainingjob.reconcile.gangs import release_gangs
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.resources import plan_resources
from trainingjob.reconcile.status import Outcome, build_status
from trainingjob.reconcile.validation import spec_errors
from trainingjob.reconcile.workers import counters, delete_pods, plan_workers, progress_changes


def plan(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig) -> Plan:
    if job.deleting:
        return plan_deletion(job, observed)
    result = Plan()
    if k.FINALIZER not in job.finalizers:
        result.actions.append(AddFinalizer())
    if job.status.finished:
        plan_finished(job, observed, now, result)
        return result
    problems = spec_errors(job.spec) + list(observed.rejections)
    if problems:
        return fail_invalid(job, observed, result, "; ".join(problems), now)
    result.actions += repair_shared_children(job, observed, config, result.events)
    if job.spec.suspend:
        plan_suspended(job, observed, now, result)
        plan_resources(job, observed, now, config, result)
        return result
    plan_workers(job, observed, now, config, result)
    plan_resources(job, observed, now, config, result)
    if result.status.finished:
        plan_finished(job, observed, now, result, just_finished=True)
    else:
        publish_endpoints(job, observed, now, result)
    return result


def publish_endpoints(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, result: Plan) -> None:
    """The Service's EndpointSlices (reconcile/endpoints.py), and a look again when a partial write waits."""
    writes, wait = plan_endpoints(job, observed, now)
    result.actions += writes
    if wait is not None:
        result.requeue_after = wait if result.requeue_after is None else min(result.requeue_after, wait)


def plan_deletion(job: TrainingJob, observed: ObservedChildren) -> Plan:
    """Delete the workers now (don't leave training running until GC gets there), then let the job go."""
    actions: list = delete_pods(p for p in observed.pods if p.live)
    if k.FINALIZER in job.finalizers:
        actions.append(RemoveFinalizer())
    return Plan(actions=actions, status=job.status)


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
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, result: Plan, just_finished: bool = False
) -> None:
    """A finished job ignores spec changes; it only cleans up its pods and, with a TTL, itself.

    A progress report still pending is folded in: the last one (100 %, the final checkpoint) often arrives within
    the progress write interval of the previous write, and is the one worth keeping in the finished job's status.
    """
    status = result.status if just_finished else job.status
    if not just_finished and observed.progress is not None:
        status = status.replace(**progress_changes(job, observed).fields)
    live = [p for p in observed.pods if p.live and p.uid not in observed.released_pods]
    succeeded = status.phase is Phase.SUCCEEDED
    already = {a.name for a in result.actions if isinstance(a, DeleteChild)}
    result.actions += delete_pods(p for p in pods_to_clean(job, live, succeeded) if p.name not in already)
    result.actions += [a for a in release_gangs(job, observed) if a.name not in already]
    deleting = {a.name for a in result.actions if isinstance(a, DeleteChild) and a.kind == "Pod"}
    deleting |= {p.name for p in observed.pods if p.uid in observed.released_pods}
    status = result.status = status.replace(**finished_worker_details(status, observed.pods, deleting))
    ttl = job.spec.ttl_seconds_after_finished
    finished_at = status.completion_time
    if ttl is None or finished_at is None:
        return
    left = (finished_at + datetime.timedelta(seconds=ttl) - now).total_seconds()
    if left <= 0:
        result.actions.append(DeleteJob())
        result.events.append(Event("Normal", "TTLExpired", f"deleting the job {ttl}s after it finished"))
    else:
        result.requeue_after = left


def fail_invalid(
    job: TrainingJob, observed: ObservedChildren, result: Plan, message: str, now: datetime.datetime
) -> Plan:
    outcome = Outcome(Phase.FAILED, "InvalidSpec", message)
    result.actions += delete_pods(p for p in observed.pods if p.live)
    result.actions += release_gangs(job, observed)
    result.status = build_status(job, outcome, {}, counters(job), now)
    result.events.append(Event("Warning", "InvalidSpec", message))
    return result


def repair_shared_children(
    job: TrainingJob, observed: ObservedChildren, config: OperatorConfig, events: list[Event]
) -> list:
    """Create the Service, ConfigMap and checkpoint PVC when missing; bring the Service's ports and the ConfigMap's
    data in line with the spec when they differ."""
    actions: list = []
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
    return actions


def plan_suspended(job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, result: Plan) -> None:
    """No workers while suspended; everything else stays. The deadline clock stops (suspendTime)."""
    result.actions += delete_pods(p for p in observed.pods if p.live)
    result.actions += release_gangs(job, observed)
    outcome = Outcome(Phase.SUSPENDED, "JobSuspended", "the job is suspended (spec.suspend)")
    changes = {
        "suspend_time": job.status.suspend_time or now,
        "next_restart_time": None,
        "attempt_start_time": None,
        "gang": None,
    }
    result.status = build_status(job, outcome, {}, counters(job), now, changes)
    if job.status.phase is not Phase.SUSPENDED:
        result.events.append(Event("Normal", "Suspended", "workers deleted; set spec.suspend=false to resume"))


def config_event(job: TrainingJob) -> Event:
    """A spec the operator has not acted on yet explains a different ConfigMap; otherwise someone edited it."""
    name = config_map_name(job.name)
    if job.status.observed_generation != job.generation:
        return Event("Normal", "ConfigUpdated", f"updated {name} for generation {job.generation} of the spec")
    return Event("Normal", "ConfigRestored", f"restored {name} to the job's spec (it had been edited)")
