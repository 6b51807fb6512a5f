"""What the TrainingJob controller reconciles, owns and watches, and what it keeps of each object.

Each watched resource feeds one or more indexes: a function from the raw object to (key, trimmed view), the key
being the (namespace, name) of the job the object belongs to. The views are what the planner reads and nothing more
(pods become PodViews, services their ports, …), so memory grows with what planning needs, not with the size of
the objects. tests/rbac_usage.py derives the operator's get/list/watch grants from the registrations.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.conversion import to_internal
from trainingjob.api.names import config_map_name, service_name
from trainingjob.api.runtimes import RuntimeRef, RuntimeSnapshot
from trainingjob.builders.endpoints import LABEL_SLICE_MANAGER, SLICE_MANAGER, SliceView, slice_view
from trainingjob.builders.service import ServiceView, service_view
from trainingjob.kube.reflector import Resource, object_key
from trainingjob.operator.runtime.controller import Mapper, Registration
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.store import Indexes, IndexFunction, IndexName, ObjectKey, views
from trainingjob.operator.runtime.views import MANAGED, labels, trimmed_body
from trainingjob.reconcile.observed import PodView, pod_view
from trainingjob.reconcile.surroundings import ClaimView, claim_view
from trainingjob.scheduling.gang import GangProvider

TRAININGJOBS = Resource(k.GROUP, k.WATCHED_VERSION, k.PLURAL, k.KIND)
Entry = tuple[Hashable, Any] | None

TRAININGJOB_BODIES: IndexName[Mapping[str, Any]] = IndexName("trainingjob_bodies")
WORKER_PODS: IndexName[PodView] = IndexName("worker_pods")
DEPARTED_PODS: IndexName[PodView] = IndexName("departed_pods")
WORKER_SERVICES: IndexName[ServiceView] = IndexName("worker_services")
JOB_CONFIG_MAPS: IndexName[dict[str, str]] = IndexName("job_config_maps")
JOB_ENDPOINT_SLICES: IndexName[SliceView] = IndexName("job_endpoint_slices")
JOB_CLAIMS: IndexName[ClaimView] = IndexName("job_claims")
# Runtimes by (namespace, name), namespace "" for the cluster-scoped ones; and the jobs that name a runtime without
# having recorded it yet, by (kind, namespace, name) of the runtime: only those care when one appears or changes.
RUNTIMES: dict[str, IndexName[RuntimeSnapshot]] = {
    k.CLUSTER_RUNTIME_KIND: IndexName("cluster_runtimes"),
    k.NAMESPACED_RUNTIME_KIND: IndexName("namespaced_runtimes"),
}
JOBS_AWAITING_RUNTIME: IndexName[ObjectKey] = IndexName("jobs_awaiting_runtime")
RUNTIME_RESOURCES = {
    k.CLUSTER_RUNTIME_KIND: Resource(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, k.CLUSTER_RUNTIME_KIND),
    k.NAMESPACED_RUNTIME_KIND: Resource(
        k.GROUP, k.RUNTIME_VERSION, k.NAMESPACED_RUNTIME_PLURAL, k.NAMESPACED_RUNTIME_KIND
    ),
}
# Filled by the Workload controller's watch (operator/kueue/watches.py) when the cluster serves Kueue.
JOB_WORKLOADS_INDEX = "job_workloads"


def trainingjob_body(body: Mapping[str, Any]) -> Entry:
    """Stored in the internal shape (api/conversion.py): nothing downstream cares which version was watched."""
    return object_key(body), to_internal(trimmed_body(body, k.WATCHED_API_VERSION, k.KIND))


def worker_pod(body: Mapping[str, Any]) -> Entry:
    job = labels(body).get(k.LABEL_JOB_NAME)
    return ((object_key(body)[0], job), pod_view(body)) if job else None


def disrupted_worker(body: Mapping[str, Any]) -> Entry:
    """A worker pod that left marked DisruptionTarget (preempted, evicted): the planner says why it went even when
    the pod was removed before any plan saw it being deleted. Other departures need no memory."""
    entry = worker_pod(body)
    return entry if entry is not None and entry[1].disruption_reason else None


def worker_service(body: Mapping[str, Any]) -> Entry:
    """Its ports, not just its name (the planner compares them with spec.networking.masterPort), and whether it
    selects pods (then kube-controller-manager keeps its EndpointSlices)."""
    namespace, name = object_key(body)
    job = labels(body).get(k.LABEL_JOB_NAME)
    if not job or name != service_name(job):
        return None
    return (namespace, job), service_view(body)


def job_endpoint_slice(body: Mapping[str, Any]) -> Entry:
    """One of the slices the operator publishes for a job's Service (builders/endpoints.py), as addresses."""
    job = labels(body).get(k.LABEL_JOB_NAME)
    return ((object_key(body)[0], job), slice_view(body)) if job else None


def job_config_map(body: Mapping[str, Any]) -> Entry:
    namespace, name = object_key(body)
    job = labels(body).get(k.LABEL_JOB_NAME)
    return ((namespace, job), dict(body.get("data") or {})) if job and name == config_map_name(job) else None


def job_claim(body: Mapping[str, Any]) -> Entry:
    """Name, phase and creation time: a checkpoint PVC still Pending after a while is reported on the job."""
    job = labels(body).get(k.LABEL_JOB_NAME)
    return ((object_key(body)[0], job), claim_view(body)) if job else None


def runtime_view(kind: str) -> IndexFunction:
    """A runtime as the planner reads it: its generation, framework and template."""

    def view(body: Mapping[str, Any]) -> Entry:
        return object_key(body), RuntimeSnapshot.from_body({**body, "kind": kind})

    return view


def job_awaiting_runtime(body: Mapping[str, Any]) -> Entry:
    """A job that names a runtime and has not recorded one: the runtime's arrival or change must wake it."""
    ref = RuntimeRef.from_spec(body.get("spec") or {})
    if ref is None or (body.get("status") or {}).get("runtime"):
        return None
    namespace, name = object_key(body)
    return (ref.kind, *ref.key(namespace)), (namespace, name)


def jobs_of_runtime(kind: str) -> Mapper:
    """From a changed runtime to the jobs waiting for it (those that recorded it do not care)."""

    def mapped(indexes: Indexes, key: Hashable) -> list[ObjectKey]:
        return views(indexes, JOBS_AWAITING_RUNTIME, (kind, *key))  # type: ignore[misc]

    return mapped


def gang_object(provider: GangProvider) -> IndexFunction:
    def view(body: Mapping[str, Any]) -> Entry:
        job = labels(body).get(k.LABEL_JOB_NAME)
        return ((object_key(body)[0], job), provider.view(body)) if job else None

    return view


# For: the jobs themselves. Owns: every child, by the job it belongs to.
JOBS_WATCH = Watch(
    TRAININGJOBS, "", {TRAININGJOB_BODIES: trainingjob_body, JOBS_AWAITING_RUNTIME: job_awaiting_runtime}
)
# Watches: runtimes, which no job owns; a change reaches the jobs waiting for one through jobs_of_runtime.
RUNTIME_WATCHES = tuple(
    Watch(resource, "", {RUNTIMES[kind]: runtime_view(kind)}, cluster_scoped=kind == k.CLUSTER_RUNTIME_KIND)
    for kind, resource in RUNTIME_RESOURCES.items()
)
CHILD_WATCHES: tuple[Watch, ...] = (
    Watch(Resource("", "v1", "pods", "Pod"), MANAGED, {WORKER_PODS: worker_pod}, {DEPARTED_PODS: disrupted_worker}),
    # What the applier writes of these stands in for the cached views until their events arrive (Watch.stands_in).
    Watch(Resource("", "v1", "services", "Service"), MANAGED, {WORKER_SERVICES: worker_service}, stands_in=True),
    Watch(Resource("", "v1", "configmaps", "ConfigMap"), MANAGED, {JOB_CONFIG_MAPS: job_config_map}, stands_in=True),
    # Only the slices we write: kube-controller-manager copies a Service's labels onto the slices it makes.
    Watch(
        Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
        f"{MANAGED},{LABEL_SLICE_MANAGER}={SLICE_MANAGER}",
        {JOB_ENDPOINT_SLICES: job_endpoint_slice},
        stands_in=True,
    ),
    Watch(Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"), MANAGED, {JOB_CLAIMS: job_claim}),
)


def gang_watches(providers: Iterable[GangProvider]) -> tuple[Watch, ...]:
    """The gang objects of every gang API the cluster serves (found by discovery at startup), one index each."""
    return tuple(
        Watch(Resource(p.api.group, p.api.version, p.api.plural), MANAGED, {p.index: gang_object(p)}) for p in providers
    )


def same_job(indexes: Indexes, key: Hashable) -> Iterable[Hashable]:
    return (key,)


def registration(gang_providers: Iterable[GangProvider] = (), kueue: bool = False) -> Registration:
    """`kueue`: the cluster serves Kueue's Workloads; a change of a job's Workload (admitted, evicted) plans the job
    again (the Workload controller, operator/kueue/, owns and watches them)."""
    return Registration(
        TRAININGJOBS,
        TRAININGJOB_BODIES,
        owns=(JOBS_WATCH, *CHILD_WATCHES, *gang_watches(gang_providers), *RUNTIME_WATCHES),
        watches=(
            *((RUNTIMES[kind], jobs_of_runtime(kind)) for kind in RUNTIMES),
            *(((JOB_WORKLOADS_INDEX, same_job),) if kueue else ()),
        ),
        lookups=frozenset({JOBS_AWAITING_RUNTIME}),
    )
