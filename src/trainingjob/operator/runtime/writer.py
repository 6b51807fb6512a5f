"""Every API write of the operator, for every kind, in one place: one table of which API writes which kind, one
reading of the API server's refusals, one limit on concurrent writes.

A write of a child answers with an Outcome, not an exception, for everything a controller plans around:
AlreadyExists on a create (names are deterministic: the object is ours, or a namesake the controller looks into),
NotFound or a failed uid precondition on a delete or patch (gone already, or a newer namesake), the user's spec
refused (422, PodSecurity) and admission refusing for now (ResourceQuota, LimitRange, a webhook). Anything else
raises, and the work queue retries the reconcile. Writes of the controllers' own objects (status, finalizers,
deletion) raise as they are: a 404 or 409 there means the plan was made from a stale object.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.kube.reflector import Resource
from trainingjob.kube.status import api_message
from trainingjob.operator.runtime.calls import MERGE_PATCH, namespace_refuses_content, record_event, unread
from trainingjob.planning.actions import Event

_ABSENT = object()


class Outcome(enum.Enum):
    DONE = "done"  # the write happened
    EXISTED = "existed"  # a create met AlreadyExists
    # A delete or patch met NotFound, or a uid precondition that failed (a newer namesake); or a create met a namespace
    # being deleted or gone, which takes the parent with it.
    GONE = "gone"
    REJECTED = "rejected"  # the API server found the object invalid: the user's spec must change
    DENIED = "denied"  # admission refused the create for now (quota, LimitRange, a webhook): it may pass later


@dataclass(frozen=True)
class Written:
    """What one write of a child did; `message` is the API server's word for REJECTED and DENIED."""

    outcome: Outcome
    message: str = ""


DONE, EXISTED, GONE = Written(Outcome.DONE), Written(Outcome.EXISTED), Written(Outcome.GONE)


class AdmissionRefused(Exception):
    """Admission refused a child for now (quota, a webhook): the reconcile is retried with backoff. Raised by an
    applier after its other writes; the controller logs it as a warning with the API server's words, not a crash."""


Method = Callable[..., Awaitable[Any]]
# Which API method writes which kind of child, per verb: the one table (tests/rbac_usage.py reads the RBAC the
# operator needs from these names). A child that is a custom object (a gang's PodGroup) is written with the Resource
# its controller names: the kit knows no gang provider (tests/unit/test_layers.py).
CREATES: dict[str, Callable[[Writer], Method]] = {
    "Pod": lambda w: w.core.create_namespaced_pod,
    "Service": lambda w: w.core.create_namespaced_service,
    "ConfigMap": lambda w: w.core.create_namespaced_config_map,
    "PersistentVolumeClaim": lambda w: w.core.create_namespaced_persistent_volume_claim,
    "Secret": lambda w: w.core.create_namespaced_secret,  # a framework's child, e.g. MPI's key (frameworks/mpi.py)
    "EndpointSlice": lambda w: w.discovery.create_namespaced_endpoint_slice,
    "Deployment": lambda w: w.apps.create_namespaced_deployment,
    "HorizontalPodAutoscaler": lambda w: w.autoscaling.create_namespaced_horizontal_pod_autoscaler,
}
PATCHES: dict[str, Callable[[Writer], Method]] = {
    "Service": lambda w: w.core.patch_namespaced_service,
    "EndpointSlice": lambda w: w.discovery.patch_namespaced_endpoint_slice,
    "Deployment": lambda w: w.apps.patch_namespaced_deployment,
    "HorizontalPodAutoscaler": lambda w: w.autoscaling.patch_namespaced_horizontal_pod_autoscaler,
}
REPLACES: dict[str, Callable[[Writer], Method]] = {"ConfigMap": lambda w: w.core.replace_namespaced_config_map}
DELETES: dict[str, Callable[[Writer], Method]] = {
    "Pod": lambda w: w.core.delete_namespaced_pod,
    "HorizontalPodAutoscaler": lambda w: w.autoscaling.delete_namespaced_horizontal_pod_autoscaler,
}


def is_invalid_child(error: ApiException) -> bool:
    """Rejections caused by the user's spec (not by us, not transient): invalid objects, PodSecurity violations, and
    a body the API server cannot decode (400 "cannot be handled as a Pod": a value from the spec its schema let
    through, e.g. a quantity the parser refuses), which no retry can change. A webhook's 400 is a denial instead."""
    body = str(error.body or "")
    if error.status == 400:
        return "admission webhook" not in body
    return error.status == 422 or (error.status == 403 and "violates PodSecurity" in body)


def is_admission_denial(error: ApiException) -> bool:
    """Refusals that may pass later without a spec change: 403 from ResourceQuota, LimitRange, the Priority plugin
    (a missing PriorityClass) or a validating webhook, and a webhook's denial with another 4xx code."""
    if error.status == 403:
        return True
    return error.status == 400 and "admission webhook" in str(error.body or "")


def refused_creation(error: ApiException, kind: str, name: str) -> Written:
    """What a create's refusal means for the controller; raises what it cannot plan around."""
    if error.status == 409:
        return EXISTED  # the name is deterministic: ours, or a namesake that is not
    if namespace_refuses_content(error):
        return GONE  # the parent goes with its namespace: nothing to retry, nothing to report
    if is_invalid_child(error):
        return Written(Outcome.REJECTED, f"{kind} {name} was rejected: {api_message(error)}")
    if is_admission_denial(error):
        return Written(Outcome.DENIED, api_message(error))
    raise error


def refused_change(error: ApiException, kind: str, name: str) -> Written:
    """What a patch's or replace's refusal means: gone (or a newer namesake), or the spec refused; else raises."""
    if error.status in (404, 409):
        return GONE
    if is_invalid_child(error):
        return Written(Outcome.REJECTED, f"{kind} {name} was rejected: {api_message(error)}")
    raise error


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


class Writer:
    def __init__(self, api: client.ApiClient | None, max_concurrent_writes: int, **apis: Any) -> None:
        """`apis` replace the client's `core`, `custom`, `discovery`, `apps` and `autoscaling` APIs (unit tests
        pass a fake server, and no client: then the APIs not passed are None)."""

        def api_of(name: str, build: Callable[[Any], Any]) -> Any:
            return apis[name] if name in apis else build(api) if api is not None else None

        self.core = api_of("core", client.CoreV1Api)
        self.custom = api_of("custom", client.CustomObjectsApi)
        self.discovery = api_of("discovery", client.DiscoveryV1Api)
        self.apps = api_of("apps", client.AppsV1Api)
        self.autoscaling = api_of("autoscaling", client.AutoscalingV2Api)
        self.write_slots = asyncio.Semaphore(max_concurrent_writes)

    # Children: an Outcome for whatever a controller plans around.

    async def create(self, namespace: str, manifest: Mapping[str, Any], resource: Resource | None = None) -> Written:
        """Create a child: a kind of the CREATES table, or a custom object of `resource` when given."""
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            async with self.write_slots:
                if resource is not None:
                    group, version, plural = resource.group, resource.version, resource.plural
                    await unread(
                        self.custom.create_namespaced_custom_object, group, version, namespace, plural, manifest
                    )
                else:
                    await unread(CREATES[kind](self), namespace, manifest)
        except ApiException as error:
            return refused_creation(error, kind, name)
        return DONE

    async def patch(self, namespace: str, kind: str, name: str, patch: Mapping[str, Any]) -> Written:
        """A JSON merge patch: lists the patch holds are replaced whole; what it does not mention stays (what the
        API server allocated or defaulted)."""
        return await self._change(kind, name, PATCHES[kind](self), name, namespace, patch, _content_type=MERGE_PATCH)

    async def replace(self, namespace: str, manifest: Mapping[str, Any]) -> Written:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        return await self._change(kind, name, REPLACES[kind](self), name, namespace, manifest)

    async def _change(
        self, kind: str, name: str, call: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any
    ) -> Written:
        try:
            async with self.write_slots:
                await unread(call, *args, **kwargs)
        except ApiException as error:
            return refused_change(error, kind, name)
        return DONE

    async def delete(
        self,
        namespace: str,
        kind: str,
        name: str,
        uid: str | None = None,
        force: bool = False,
        resource: Resource | None = None,
    ) -> Written:
        """Delete a child (a kind of the DELETES table, or a custom object of `resource` when given), only the one
        with `uid` when given; `force`: with gracePeriodSeconds 0 (in the body: the client's keyword is ignored when
        a body is passed)."""
        options = client.V1DeleteOptions(
            grace_period_seconds=0 if force else None,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            async with self.write_slots:
                if resource is not None:
                    group, version, plural = resource.group, resource.version, resource.plural
                    await unread(
                        self.custom.delete_namespaced_custom_object,
                        group,
                        version,
                        namespace,
                        plural,
                        name,
                        body=options,
                    )
                else:
                    await unread(DELETES[kind](self), name, namespace, body=options)
        except ApiException as error:
            if error.status in (404, 409):
                return GONE  # gone already, or a newer namesake (uid precondition failed)
            raise
        return DONE

    # Children that are custom objects of another controller (a sweep's TrainingJobs): the same Outcomes.

    async def create_object(self, resource: Resource, namespace: str, manifest: Mapping[str, Any]) -> Written:
        """Create a custom object a controller owns (a TrainingSweep's trials are TrainingJobs)."""
        return await self.create(namespace, manifest, resource)

    async def patch_object(
        self, resource: Resource, namespace: str, name: str, uid: str, patch: Mapping[str, Any], status: bool = False
    ) -> Written:
        """Merge-patch a custom object a controller owns (its status subresource with `status`), only the one with
        `uid` (a newer namesake is GONE); a resourceVersion in the patch's metadata is a precondition too."""
        body = {**patch, "metadata": {**(patch.get("metadata") or {}), "uid": uid}}
        custom, group, where = self.custom, resource.group, (resource.version, namespace, resource.plural, name, body)
        try:
            async with self.write_slots:
                if status:
                    await unread(custom.patch_namespaced_custom_object_status, group, *where, _content_type=MERGE_PATCH)
                else:
                    await unread(custom.patch_namespaced_custom_object, group, *where, _content_type=MERGE_PATCH)
        except ApiException as error:
            return refused_change(error, resource.kind, name)
        return DONE

    # The controllers' own objects: errors raise (a 404 or 409 means the plan was made from a stale object).

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, resource_version: str, patch: Mapping[str, Any]
    ) -> str:
        """Merge-patch the status if the object is still at `resource_version`; its resourceVersion afterwards (the
        same when the patch changed nothing: the API server then writes nothing and sends no watch event)."""
        group, version, plural = resource.group, resource.version, resource.plural
        body = {"metadata": {"resourceVersion": resource_version}, "status": patch}
        updated = await self.custom.patch_namespaced_custom_object_status(
            group, version, namespace, plural, name, body, _content_type=MERGE_PATCH
        )
        return updated["metadata"]["resourceVersion"]

    async def patch_metadata(self, resource: Resource, namespace: str, name: str, metadata: Mapping[str, Any]) -> str:
        """Merge-patch the object's metadata (finalizers; a resourceVersion in it is a precondition); the object's
        resourceVersion afterwards."""
        group, version, plural = resource.group, resource.version, resource.plural
        updated = await self.custom.patch_namespaced_custom_object(
            group, version, namespace, plural, name, {"metadata": metadata}, _content_type=MERGE_PATCH
        )
        return updated["metadata"]["resourceVersion"]

    async def delete_object(self, resource: Resource, namespace: str, name: str, uid: str) -> None:
        """Delete the object with this uid, in the background (garbage collection takes what it owns); gone
        already, or a newer one of the same name, is no error."""
        group, version, plural = resource.group, resource.version, resource.plural
        options = client.V1DeleteOptions(propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid))
        try:
            await self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name, body=options)
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    async def record_event(self, resource: Resource, obj: tuple[str, str, str], event: Event) -> None:
        """A core/v1 Event on one of our objects, given as (namespace, name, uid): what `kubectl describe` shows.
        Losing one must not fail a reconcile."""
        namespace, name, uid = obj
        await record_event(self.core, (resource.api_version, resource.kind, namespace, name, uid), event)
