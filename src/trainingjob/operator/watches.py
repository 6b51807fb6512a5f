"""What the operator watches, with which server-side label selector, and what it keeps of each object.

Each watched resource feeds one or more indexes: a function from the raw object to (key, trimmed view), the key
being the (namespace, name) of the TrainingJob or LLMModel the object belongs to. The views are what the planners
read and nothing more (pods become PodViews, services their ports, …), so memory grows with what planning needs,
not with the size of the objects. tests/rbac_usage.py derives the operator's get/list/watch grants from WATCHES.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.conversion import to_internal
from trainingjob.api.names import config_map_name, service_name
from trainingjob.builders.endpoints import LABEL_SLICE_MANAGER, SLICE_MANAGER, slice_view
from trainingjob.builders.service import service_view
from trainingjob.kube.reflector import Resource
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.store import IndexFunction, Touched
from trainingjob.operator.serving import LLMMODELS, model_key
from trainingjob.reconcile.observed import pod_view
from trainingjob.reconcile.surroundings import claim_view
from trainingjob.scheduling.gang import GangProvider
from trainingjob.serving.observed import child_view

# The operator's own kinds, as watched and written (status, finalizers, Events).
TRAININGJOBS = Resource(k.GROUP, k.WATCHED_VERSION, k.PLURAL, k.KIND)
MANAGED = f"{k.LABEL_MANAGED_BY}={k.MANAGED_BY}"
MODEL_CHILDREN = f"{MANAGED},{k.LABEL_MODEL}"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
Entry = tuple[Hashable, Any] | None
# Indexes keyed by an LLMModel: their changes enqueue the model; `models_by_source` only answers lookups.
MODEL_KEYED = frozenset({"llmmodel_bodies", "model_deployments", "model_services", "model_autoscalers"})
LOOKUP_ONLY = frozenset({"models_by_source"})


def trimmed_body(body: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The object without managedFields and kubectl's last-applied copy of itself (often half its size); a list's
    items lack apiVersion and kind, which conversion reads, so they are filled in."""
    metadata = dict(body.get("metadata") or {})
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if annotations and LAST_APPLIED in annotations:
        metadata["annotations"] = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
    return {**body, "apiVersion": body.get("apiVersion") or api_version, "kind": kind, "metadata": metadata}


def _own_key(body: Mapping[str, Any]) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


def _labels(body: Mapping[str, Any]) -> Mapping[str, str]:
    return (body.get("metadata") or {}).get("labels") or {}


def trainingjob_body(body: Mapping[str, Any]) -> Entry:
    """Stored in the internal shape (api/conversion.py): nothing downstream cares which version was watched."""
    return _own_key(body), to_internal(trimmed_body(body, k.WATCHED_API_VERSION, k.KIND))


def worker_pod(body: Mapping[str, Any]) -> Entry:
    job = _labels(body).get(k.LABEL_JOB_NAME)
    return ((_own_key(body)[0], job), pod_view(body)) if job else None


def disrupted_worker(body: Mapping[str, Any]) -> Entry:
    """A worker pod that left marked DisruptionTarget (preempted, evicted): the planner says why it went even when
    the pod was removed before any plan saw it being deleted. Other departures need no memory."""
    entry = worker_pod(body)
    return entry if entry is not None and entry[1].disruption_reason else None


def worker_service(body: Mapping[str, Any]) -> Entry:
    """Its ports, not just its name (the planner compares them with spec.networking.masterPort), and whether it
    selects pods (then kube-controller-manager keeps its EndpointSlices)."""
    namespace, name = _own_key(body)
    job = _labels(body).get(k.LABEL_JOB_NAME)
    if not job or name != service_name(job):
        return None
    return (namespace, job), service_view(body)


def job_endpoint_slice(body: Mapping[str, Any]) -> Entry:
    """One of the slices the operator publishes for a job's Service (builders/endpoints.py), as addresses."""
    job = _labels(body).get(k.LABEL_JOB_NAME)
    return ((_own_key(body)[0], job), slice_view(body)) if job else None


def job_config_map(body: Mapping[str, Any]) -> Entry:
    namespace, name = _own_key(body)
    job = _labels(body).get(k.LABEL_JOB_NAME)
    return ((namespace, job), dict(body.get("data") or {})) if job and name == config_map_name(job) else None


def job_claim(body: Mapping[str, Any]) -> Entry:
    """Name, phase and creation time: a checkpoint PVC still Pending after a while is reported on the job."""
    job = _labels(body).get(k.LABEL_JOB_NAME)
    return ((_own_key(body)[0], job), claim_view(body)) if job else None


def llmmodel_body(body: Mapping[str, Any]) -> Entry:
    return _own_key(body), trimmed_body(body, k.MODEL_API_VERSION, k.MODEL_KIND)


def model_by_source(body: Mapping[str, Any]) -> Entry:
    """Which models serve which TrainingJob, so that the job's changes reach the models waiting for it."""
    namespace, name = _own_key(body)
    job = ((body.get("spec") or {}).get("source") or {}).get("trainingJob")
    return ((namespace, job), name) if job else None


def model_child(kind: str) -> IndexFunction:
    def view(body: Mapping[str, Any]) -> Entry:
        model = _labels(body).get(k.LABEL_MODEL)
        return ((_own_key(body)[0], model), child_view({**body, "kind": kind})) if model else None

    return view


def gang_object(provider: GangProvider) -> IndexFunction:
    def view(body: Mapping[str, Any]) -> Entry:
        job = _labels(body).get(k.LABEL_JOB_NAME)
        return ((_own_key(body)[0], job), provider.view(body)) if job else None

    return view


WATCHES: tuple[Watch, ...] = (
    Watch(TRAININGJOBS, "", {"trainingjob_bodies": trainingjob_body}),
    Watch(Resource("", "v1", "pods"), MANAGED, {"worker_pods": worker_pod}, {"departed_pods": disrupted_worker}),
    Watch(
        Resource("", "v1", "services"),
        MANAGED,
        {"worker_services": worker_service, "model_services": model_child("Service")},
    ),
    Watch(Resource("", "v1", "configmaps"), MANAGED, {"job_config_maps": job_config_map}),
    # Only the slices we write: kube-controller-manager copies a Service's labels onto the slices it makes.
    Watch(
        Resource("discovery.k8s.io", "v1", "endpointslices"),
        f"{MANAGED},{LABEL_SLICE_MANAGER}={SLICE_MANAGER}",
        {"job_endpoint_slices": job_endpoint_slice},
    ),
    Watch(Resource("", "v1", "persistentvolumeclaims"), MANAGED, {"job_claims": job_claim}),
    Watch(
        LLMMODELS,
        "",
        {"llmmodel_bodies": llmmodel_body, "models_by_source": model_by_source},
    ),
    Watch(Resource("apps", "v1", "deployments"), MODEL_CHILDREN, {"model_deployments": model_child("Deployment")}),
    Watch(
        Resource("autoscaling", "v2", "horizontalpodautoscalers"),
        MODEL_CHILDREN,
        {"model_autoscalers": model_child("HorizontalPodAutoscaler")},
    ),
)


def gang_watches(providers: list[GangProvider]) -> tuple[Watch, ...]:
    """The gang objects of every gang API the cluster serves (found by discovery at startup), one index each."""
    return tuple(
        Watch(Resource(p.api.group, p.api.version, p.api.plural), MANAGED, {p.index: gang_object(p)}) for p in providers
    )


def route(touched: Touched, enqueue: Callable[[tuple], None], models_of_job: Callable[[str, str], list]) -> None:
    """Turn changed (index, key) pairs into work: the job or model the key names; a job's change also reaches the
    models waiting for it (a model serves its source job's checkpoints once the job succeeds)."""
    for index, key in touched:
        if index in LOOKUP_ONLY:
            continue
        if index in MODEL_KEYED:
            enqueue(model_key(*key))
            continue
        enqueue(key)
        if index == "trainingjob_bodies":
            for model in models_of_job(*key):
                enqueue(model)
