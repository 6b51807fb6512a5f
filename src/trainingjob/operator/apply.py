"""All API writes of the operator: execute a Plan idempotently.

Order matters: finalizer first (so cleanup is guaranteed), then status with a resourceVersion precondition (a plan
made from a stale job is refused before any child is touched), then child creates/deletes with bounded concurrency.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.conversion import status_in
from trainingjob.api.types import TrainingJob
from trainingjob.builders.endpoints import SliceView, slice_view
from trainingjob.kube.status import api_message
from trainingjob.operator.calls import MERGE_PATCH, record_event, unread
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
from trainingjob.reconcile.surroundings import Refusal
from trainingjob.scheduling.gang import LABEL_GANG, provider_for

logger = logging.getLogger(__name__)
DONE, EXISTED, GONE, REJECTED, DENIED = "done", "existed", "gone", "rejected:", "denied:"
_ABSENT = object()


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
    # EndpointSlices written here, as the cache will show them (the reconciler bridges the cache's lag with them).
    published_slices: list[SliceView] = field(default_factory=list)
    writes: int = 0


def status_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch from old to new status: changed keys, and null for keys that went away.

    Nested objects are diffed key by key, because a merge patch keeps every nested key it does not mention:
    sending the new lastFailure whole would leave the previous failure's exitCode in it. Lists are replaced whole.
    """
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key, _ABSENT)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = status_patch(before, value)
            if nested:
                patch[key] = nested
        elif before != value:
            patch[key] = value
    patch.update({key: None for key in old if key not in new})
    return patch


def is_invalid_child(error: ApiException) -> bool:
    """Rejections caused by the user's spec (not by us, not transient): invalid pods, PodSecurity violations."""
    body = error.body or ""
    return error.status == 422 or (error.status == 403 and "violates PodSecurity" in str(body))


def is_admission_denial(error: ApiException) -> bool:
    """Refusals that may pass later without a spec change: 403 from ResourceQuota, LimitRange, the Priority plugin
    (a missing PriorityClass) or a validating webhook, and a webhook's denial with another 4xx code."""
    if error.status == 403:
        return True
    return error.status == 400 and "admission webhook" in str(error.body or "")


class Applier:
    def __init__(
        self,
        api: client.ApiClient | None,
        max_concurrent_writes: int,
        core: Any = None,
        custom: Any = None,
        discovery: Any = None,
    ) -> None:
        """`core`, `custom` and `discovery` replace the CoreV1Api, CustomObjectsApi and DiscoveryV1Api (unit tests
        pass a fake server)."""
        self.core = core if core is not None else client.CoreV1Api(api)
        self.custom = custom if custom is not None else client.CustomObjectsApi(api)
        self.discovery = discovery if discovery is not None else client.DiscoveryV1Api(api)
        self.write_slots = asyncio.Semaphore(max_concurrent_writes)
        self.gang_bursts = asyncio.Lock()

    async def apply(self, job: TrainingJob, body: Mapping[str, Any], plan: Plan) -> ApplyResult:
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
            await self.delete_job(job)
            result.writes += 1
        if any(isinstance(a, RemoveFinalizer) for a in finalizer_actions):
            await self.remove_finalizer(job)
            result.writes += 1
        return result

    async def write_job(
        self, job: TrainingJob, body: Mapping[str, Any], plan: Plan, child_actions: list, result: ApplyResult
    ) -> None:
        """Finalizer, then status; both with a resourceVersion precondition."""
        planned_from = body["metadata"]["resourceVersion"]
        resource_version = planned_from
        if any(isinstance(a, AddFinalizer) for a in plan.actions):
            resource_version = await self.set_finalizers(job, [*job.finalizers, k.FINALIZER], resource_version)
            result.job_changed = True
            result.writes += 1
        # Deletes are only safe if the plan was made from the current job: force the precondition check. The API
        # server checks the resourceVersion even when the patch changes nothing (an empty status patch); it then
        # keeps the resourceVersion and sends no event, which is why job_changed compares versions.
        must_check = any(isinstance(a, DeleteChild) for a in child_actions)
        if not job.deleting and (plan.status != dict(job.status) or must_check):
            resource_version = await self.write_status(job, plan.status, resource_version)
            result.writes += 1
            result.job_changed = resource_version != planned_from

    @staticmethod
    def account(action: Any, outcome: str, result: ApplyResult) -> None:
        if outcome.startswith(REJECTED):
            result.rejections.append(outcome.removeprefix(REJECTED))
        if outcome.startswith(DENIED):
            result.denials.append(Refusal(action.kind, action.name, outcome.removeprefix(DENIED)))
        if outcome == DONE:
            result.writes += 1
        if isinstance(action, CreateChild) and outcome == DONE:
            result.created += 1
        # Only a pod this call created is claimed: its watch event will come. A create that met AlreadyExists
        # claims nothing (client-go settles it at once): the pod is either in the cache already, on its way there
        # (the next plan meets AlreadyExists again, harmlessly), or not this job's at all (relabelled or another
        # owner's), and then no event of this job would ever settle the claim.
        if isinstance(action, CreateChild) and action.kind == "Pod" and outcome == DONE:
            result.claimed_pods.append(action.name)
        if isinstance(action, CreateChild) and action.kind == "Pod" and outcome == EXISTED:
            result.existed_pods.append(action.name)
        if isinstance(action, CreateChild | ReplaceChild) and action.kind == "EndpointSlice" and outcome == DONE:
            result.published_slices.append(slice_view(action.manifest))
        if isinstance(action, DeleteChild) and action.uid and outcome in (DONE, GONE):
            result.released_pods.append(action.uid)  # a pod's or a gang object's: see Reconciler.observed

    async def report_created_workers(self, job: TrainingJob, actions: list, outcomes: list[str]) -> None:
        """One Event per batch of pods this call really created (a create that met AlreadyExists is not news), and
        one per gang object."""
        for action, outcome in zip(actions, outcomes, strict=True):
            if (
                isinstance(action, CreateChild)
                and outcome == DONE
                and provider_for(action.manifest["apiVersion"], action.kind)
            ):
                message = f"created {action.kind} {action.name} ({action.manifest['apiVersion']}): {gang_size(action)}"
                await self.record_event(job, Event("Normal", "GangCreated", message))
        created = [
            a
            for a, o in zip(actions, outcomes, strict=True)
            if isinstance(a, CreateChild) and a.kind == "Pod" and o == DONE
        ]
        if created:
            attempt = created[0].manifest["metadata"]["labels"].get(k.LABEL_ATTEMPT, "0")
            await self.record_event(
                job, Event("Normal", "WorkersCreated", f"created {len(created)} worker pod(s) for attempt {attempt}")
            )

    async def record_event(self, job: TrainingJob, event: Event) -> None:
        """A core/v1 Event on the job (what `kubectl describe tj` shows); losing one must not fail a reconcile."""
        involved = (k.WATCHED_API_VERSION, k.KIND, job.namespace, job.name, job.uid)
        await record_event(self.core, involved, event)

    async def set_finalizers(self, job: TrainingJob, finalizers: list[str], resource_version: str) -> str:
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}}
        updated = await self.custom.patch_namespaced_custom_object(
            k.GROUP, k.WATCHED_VERSION, job.namespace, k.PLURAL, job.name, patch, _content_type=MERGE_PATCH
        )
        return updated["metadata"]["resourceVersion"]

    async def delete_job(self, job: TrainingJob) -> None:
        """ttlSecondsAfterFinished: the job goes; garbage collection takes what it owns."""
        options = client.V1DeleteOptions(
            propagation_policy="Background", preconditions=client.V1Preconditions(uid=job.uid)
        )
        try:
            await self.custom.delete_namespaced_custom_object(
                k.GROUP, k.WATCHED_VERSION, job.namespace, k.PLURAL, job.name, body=options
            )
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    async def remove_finalizer(self, job: TrainingJob) -> None:
        remaining = [f for f in job.finalizers if f != k.FINALIZER]
        try:
            await self.custom.patch_namespaced_custom_object(
                k.GROUP,
                k.WATCHED_VERSION,
                job.namespace,
                k.PLURAL,
                job.name,
                {"metadata": {"finalizers": remaining or None}},
                _content_type=MERGE_PATCH,
            )
        except ApiException as error:
            if error.status != 404:
                raise

    async def write_status(self, job: TrainingJob, status: Mapping[str, Any], resource_version: str) -> str:
        """Patch the status if the job is still at `resource_version`; the job's resourceVersion afterwards.
        Statuses are internal-shaped; the patch is in the shape of the version written."""
        old, new = status_in(job.status, k.WATCHED_VERSION), status_in(status, k.WATCHED_VERSION)
        patch = {"metadata": {"resourceVersion": resource_version}, "status": status_patch(old, new)}
        updated = await self.custom.patch_namespaced_custom_object_status(
            k.GROUP, k.WATCHED_VERSION, job.namespace, k.PLURAL, job.name, patch, _content_type=MERGE_PATCH
        )
        return updated["metadata"]["resourceVersion"]

    async def apply_children(self, job: TrainingJob, actions: list) -> list[str]:
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

    async def apply_all(self, job: TrainingJob, actions: list) -> list[str]:
        return list(await asyncio.gather(*(self.apply_child(job, a) for a in actions)))

    async def apply_burst(self, job: TrainingJob, members: list) -> list[str]:
        """A gang's pods, while no other gang's are being created (see apply_children)."""
        if not members:
            return []
        async with self.gang_bursts:
            return await self.apply_all(job, members)

    async def apply_child(self, job: TrainingJob, action: Any) -> str:
        """Run one child action: DONE, EXISTED, GONE, or REJECTED + the API server's reason for refusing it."""
        async with self.write_slots:
            try:
                await self._apply_child(job, action)
            except ApiException as error:
                if isinstance(action, CreateChild) and error.status == 409:
                    return EXISTED  # the name is deterministic: ours, or a namesake that is not (see account)
                if isinstance(action, DeleteChild) and error.status in (404, 409):
                    return GONE  # gone already, or a newer namesake (uid precondition failed)
                if isinstance(action, CreateChild) and is_invalid_child(error):
                    return f"{REJECTED}{action.kind} {action.name} was rejected: {api_message(error)}"
                if isinstance(action, CreateChild) and is_admission_denial(error):
                    return f"{DENIED}{api_message(error)}"
                raise
        return DONE

    async def _apply_child(self, job: TrainingJob, action: Any) -> None:
        ns = job.namespace
        api_version = action.api_version if isinstance(action, DeleteChild) else action.manifest["apiVersion"]
        provider = provider_for(api_version, action.kind) if api_version != "v1" else None
        if provider is not None:
            await self._apply_gang_object(ns, provider.api, action)
        elif action.kind == "EndpointSlice":
            await self._apply_endpoint_slice(ns, action)
        elif isinstance(action, CreateChild):
            create = {
                "Pod": self.core.create_namespaced_pod,
                "Service": self.core.create_namespaced_service,
                "ConfigMap": self.core.create_namespaced_config_map,
                "PersistentVolumeClaim": self.core.create_namespaced_persistent_volume_claim,
            }.get(action.kind) or self.core.create_namespaced_secret  # the MPI launcher's key (builders/secret.py)
            await unread(create, ns, action.manifest)
        elif isinstance(action, DeleteChild):
            # A body with gracePeriodSeconds 0 forces the delete (the client's keyword is ignored with a body).
            options = client.V1DeleteOptions(
                grace_period_seconds=0 if action.force else None,
                preconditions=client.V1Preconditions(uid=action.uid) if action.uid else None,
            )
            await unread(self.core.delete_namespaced_pod, action.name, ns, body=options)
        elif isinstance(action, ReplaceChild) and action.kind == "Service":
            patch = {"spec": action.manifest["spec"]}
            await unread(self.core.patch_namespaced_service, action.name, ns, patch, _content_type=MERGE_PATCH)
        elif isinstance(action, ReplaceChild):
            await unread(self.core.replace_namespaced_config_map, action.name, ns, action.manifest)

    async def _apply_endpoint_slice(self, ns: str, action: CreateChild | ReplaceChild) -> None:
        """Create a job's slice, or merge-patch its endpoints and ports (lists are replaced whole)."""
        if isinstance(action, CreateChild):
            await unread(self.discovery.create_namespaced_endpoint_slice, ns, action.manifest)
        else:
            patch = {key: action.manifest[key] for key in ("endpoints", "ports")}
            await unread(
                self.discovery.patch_namespaced_endpoint_slice, action.name, ns, patch, _content_type=MERGE_PATCH
            )

    async def _apply_gang_object(self, ns: str, api: Any, action: Any) -> None:
        """Create or delete a gang object (scheduling/gang.py) through its group's API."""
        group, version, plural = api.group, api.version, api.plural
        if isinstance(action, CreateChild):
            await unread(self.custom.create_namespaced_custom_object, group, version, ns, plural, action.manifest)
        elif isinstance(action, DeleteChild):
            options = client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=action.uid) if action.uid else None
            )
            await unread(
                self.custom.delete_namespaced_custom_object, group, version, ns, plural, action.name, body=options
            )


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
