"""A TrainingJob's plan, executed idempotently through the one writer (operator/runtime/writer.py).

Order matters: finalizer first (so cleanup is guaranteed), then status with a resourceVersion precondition (a plan
made from a stale job is refused before any child is touched), then child creates/deletes with bounded concurrency.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.conversion import status_in
from trainingjob.api.status import JobStatus
from trainingjob.api.types import TrainingJob
from trainingjob.kube.reflector import Resource
from trainingjob.operator.runtime.writer import Outcome, Writer, Written, status_patch
from trainingjob.operator.trainingjob.watches import TRAININGJOBS
from trainingjob.planning.actions import (
    AddFinalizer,
    CreateChild,
    DeleteChild,
    DeleteJob,
    Event,
    RemoveFinalizer,
    ReplaceChild,
)
from trainingjob.reconcile.plan import JobPlan
from trainingjob.reconcile.surroundings import Refusal
from trainingjob.scheduling.gang import LABEL_GANG, provider_for

logger = logging.getLogger(__name__)
# What a ReplaceChild merge-patches of each kind (ConfigMaps are replaced whole): a Service's spec (ports,
# selector; the clusterIP fields the API server allocated stay), a slice's endpoints and ports.
PATCHED_FIELDS = {"Service": ("spec",), "EndpointSlice": ("endpoints", "ports")}


@dataclass
class ApplyResult:
    """What the reconciler needs to know afterwards."""

    stale: bool = False
    # The job object changed (a new resourceVersion, so a watch event follows). A patch the server found to change
    # nothing does not count: the reconciler would wait for an event that never comes.
    job_changed: bool = False
    rejections: list[str] = field(default_factory=list)
    # Creates admission refused for now (ResourceQuota, LimitRange, a webhook, a missing PriorityClass): retried.
    denials: list[Refusal] = field(default_factory=list)
    # Children really created here (not found existing).
    created: int = 0
    # Pods whose names are now taken by us (created, or found existing), to bridge the cache's lag.
    claimed_pods: list[str] = field(default_factory=list)
    # Pods whose create met AlreadyExists: the namesake may be no worker of the job (operator/namesakes.py).
    existed_pods: list[str] = field(default_factory=list)
    # uids of pods and gang objects deleted here; the cache may show them alive a little longer.
    released_pods: list[str] = field(default_factory=list)
    # Children created (True) or replaced whole (False) here, as written: they stand in for the cached ones until
    # the cache shows them (informers.stand_in; pods are claimed instead, above).
    written: list[tuple[Mapping[str, Any], bool]] = field(default_factory=list)
    writes: int = 0


class Applier:
    """Executes TrainingJob plans: the order of the writes, the gang bursts, and what the reconciler learns."""

    def __init__(self, writer: Writer, count_status_patch: Callable[[Iterable[str]], None] | None = None) -> None:
        """`count_status_patch` is told the top-level status fields each status patch sent changes (metrics)."""
        self.writer = writer
        self.count_status_patch = count_status_patch
        self.gang_bursts = asyncio.Lock()

    async def apply(self, job: TrainingJob, body: Mapping[str, Any], plan: JobPlan) -> ApplyResult:
        result = ApplyResult()
        finalizer_actions = [a for a in plan.actions if isinstance(a, AddFinalizer | RemoveFinalizer)]
        child_actions = [a for a in plan.actions if isinstance(a, CreateChild | DeleteChild | ReplaceChild)]
        try:
            await self.write_job(job, body, plan, child_actions, result)
        except ApiException as error:
            if error.status in (404, 409):
                result.stale = True
                return result
            raise
        await asyncio.gather(*(self.record_event(job, event) for event in plan.events))
        outcomes = await self.apply_children(job, child_actions)
        for action, outcome in zip(child_actions, outcomes, strict=True):
            self.account(action, outcome, result)
        await self.report_created_workers(job, child_actions, outcomes)
        if any(isinstance(a, DeleteJob) for a in plan.actions):
            await self.writer.delete_object(TRAININGJOBS, job.namespace, job.name, job.uid)  # ttlSecondsAfterFinished
            result.writes += 1
        if any(isinstance(a, RemoveFinalizer) for a in finalizer_actions):
            await self.remove_finalizer(job)
            result.writes += 1
        return result

    async def write_job(
        self, job: TrainingJob, body: Mapping[str, Any], plan: JobPlan, child_actions: list, result: ApplyResult
    ) -> None:
        """Finalizer, then status; both with a resourceVersion precondition."""
        planned_from = body["metadata"]["resourceVersion"]
        resource_version = planned_from
        if any(isinstance(a, AddFinalizer) for a in plan.actions):
            metadata = {"finalizers": [*job.finalizers, k.FINALIZER], "resourceVersion": resource_version}
            resource_version = await self.writer.patch_metadata(TRAININGJOBS, job.namespace, job.name, metadata)
            result.job_changed = True
            result.writes += 1
        # Deletes are only safe if the plan was made from the current job: force the precondition check. The API
        # server checks the resourceVersion even when the patch changes nothing (an empty status patch); it then
        # keeps the resourceVersion and sends no event, which is why job_changed compares versions.
        must_check = any(isinstance(a, DeleteChild) for a in child_actions)
        if not job.deleting and (plan.status != job.status or must_check):
            resource_version = await self.write_status(job, plan.status, resource_version)
            result.writes += 1
            result.job_changed = resource_version != planned_from

    @staticmethod
    def account(action: Any, written: Written, result: ApplyResult) -> None:
        outcome = written.outcome
        if outcome is Outcome.REJECTED:
            result.rejections.append(written.message)
        if outcome is Outcome.DENIED:
            result.denials.append(Refusal(action.kind, action.name, written.message))
        if outcome is Outcome.DONE:
            result.writes += 1
        if isinstance(action, CreateChild) and outcome is Outcome.DONE:
            result.created += 1
        # Only a pod this call created is claimed: its watch event will come. A create that met AlreadyExists
        # claims nothing (client-go settles it at once): the pod is either in the cache already, on its way there
        # (the next plan meets AlreadyExists again, harmlessly), or not this job's at all (relabelled or another
        # owner's), and then no event of this job would ever settle the claim.
        if isinstance(action, CreateChild) and action.kind == "Pod" and outcome is Outcome.DONE:
            result.claimed_pods.append(action.name)
        if isinstance(action, CreateChild) and action.kind == "Pod" and outcome is Outcome.EXISTED:
            result.existed_pods.append(action.name)
        if isinstance(action, CreateChild | ReplaceChild) and outcome is Outcome.DONE:
            result.written.append((action.manifest, isinstance(action, CreateChild)))
        if isinstance(action, DeleteChild) and action.uid and outcome in (Outcome.DONE, Outcome.GONE):
            result.released_pods.append(action.uid)  # a pod's or a gang object's: see Reconciler.observed

    async def report_created_workers(self, job: TrainingJob, actions: list, outcomes: list[Written]) -> None:
        """One Event per batch of pods this call really created (a create that met AlreadyExists is not news), and
        one per gang object."""
        done = [
            a
            for a, o in zip(actions, outcomes, strict=True)
            if isinstance(a, CreateChild) and o.outcome is Outcome.DONE
        ]
        for action in done:
            if provider_for(action.manifest["apiVersion"], action.kind):
                message = f"created {action.kind} {action.name} ({action.manifest['apiVersion']}): {gang_size(action)}"
                await self.record_event(job, Event("Normal", "GangCreated", message))
        created = [a for a in done if a.kind == "Pod"]
        if created:
            attempt = created[0].manifest["metadata"]["labels"].get(k.LABEL_ATTEMPT, "0")
            await self.record_event(
                job, Event("Normal", "WorkersCreated", f"created {len(created)} worker pod(s) for attempt {attempt}")
            )

    async def record_event(self, job: TrainingJob, event: Event) -> None:
        await self.writer.record_event(TRAININGJOBS, (job.namespace, job.name, job.uid), event)

    async def remove_finalizer(self, job: TrainingJob) -> None:
        remaining = [f for f in job.finalizers if f != k.FINALIZER]
        try:
            await self.writer.patch_metadata(TRAININGJOBS, job.namespace, job.name, {"finalizers": remaining or None})
        except ApiException as error:
            if error.status != 404:
                raise

    async def write_status(self, job: TrainingJob, status: JobStatus, resource_version: str) -> str:
        """Patch the status if the job is still at `resource_version`; the job's resourceVersion afterwards.
        Statuses are internal-shaped; the patch is in the shape of the version written."""
        old, new = status_in(job.status.to_dict(), k.WATCHED_VERSION), status_in(status.to_dict(), k.WATCHED_VERSION)
        patch = status_patch(old, new)
        written = await self.writer.patch_status(TRAININGJOBS, job.namespace, job.name, resource_version, patch)
        if self.count_status_patch is not None:
            self.count_status_patch(patch.keys())
        return written

    async def apply_children(self, job: TrainingJob, actions: list) -> list[Written]:
        """Every child action at once, except that the pods joining a gang are created as one burst that no other
        job's gang members interleave with. kube-scheduler 1.35 holds the nodes of a gang's reserved pods at Permit
        for up to 5 minutes: two gangs competing for the same GPUs whose pods reached its queue interleaved could
        each reserve a part (3 + 3 of 6 GPUs for two 4-worker jobs) and both wait out that timeout. Created one
        gang after the other, the first gang's pods are all queued before any of the second's."""
        members = [a for a in actions if joins_gang(a)]
        others = [a for a in actions if not joins_gang(a)]
        done_others, done_members = await asyncio.gather(self.apply_all(job, others), self.apply_burst(job, members))
        members_done, others_done = iter(done_members), iter(done_others)
        return [next(members_done) if joins_gang(a) else next(others_done) for a in actions]

    async def apply_all(self, job: TrainingJob, actions: list) -> list[Written]:
        return list(await asyncio.gather(*(self.apply_child(job, a) for a in actions)))

    async def apply_burst(self, job: TrainingJob, members: list) -> list[Written]:
        """A gang's pods, while no other gang's are being created (see apply_children)."""
        if not members:
            return []
        async with self.gang_bursts:
            return await self.apply_all(job, members)

    async def apply_child(self, job: TrainingJob, action: Any) -> Written:
        ns = job.namespace
        if isinstance(action, CreateChild):
            gang = gang_resource(action.manifest["apiVersion"], action.kind)
            return await self.writer.create(ns, action.manifest, gang)
        if isinstance(action, DeleteChild):
            gang = gang_resource(action.api_version, action.kind)
            return await self.writer.delete(ns, action.kind, action.name, action.uid, action.force, gang)
        fields = PATCHED_FIELDS.get(action.kind)
        if fields is None:
            return await self.writer.replace(ns, action.manifest)
        return await self.writer.patch(ns, action.kind, action.name, {key: action.manifest[key] for key in fields})


def gang_resource(api_version: str, kind: str) -> Resource | None:
    """The API of a gang object (scheduling/gang.py's providers), a custom object the writer writes where its
    resource is given; None for every other child (the writer's tables)."""
    provider = provider_for(api_version, kind)
    return None if provider is None else Resource(provider.api.group, provider.api.version, provider.api.plural, kind)


def joins_gang(action: Any) -> bool:
    """A pod created as a member of a gang (builders/pod.py labels it with its gang)."""
    if not isinstance(action, CreateChild) or action.kind != "Pod":
        return False
    return LABEL_GANG in ((action.manifest.get("metadata") or {}).get("labels") or {})


def gang_size(action: CreateChild) -> str:
    spec = action.manifest.get("spec") or {}
    provider = provider_for(action.manifest["apiVersion"], action.kind)
    count = provider.min_count(spec) if provider is not None else 0
    return f"the scheduler binds none of its workers before {count} of them fit"
