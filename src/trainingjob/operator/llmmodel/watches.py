"""What the LLMModel controller reconciles, owns and watches, and what it keeps of each object (see
operator/trainingjob/watches.py for how indexes work)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.kube.reflector import Resource, object_key
from trainingjob.operator.runtime.controller import Registration
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.store import Indexes, IndexFunction, IndexName, views
from trainingjob.operator.runtime.views import MANAGED, labels, trimmed_body
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES
from trainingjob.serving.observed import ChildView, child_view

LLMMODELS = Resource(k.MODEL_GROUP, k.MODEL_VERSION, k.MODEL_PLURAL, k.MODEL_KIND)
MODEL_CHILDREN = f"{MANAGED},{k.LABEL_MODEL}"
Entry = tuple[Hashable, Any] | None

LLMMODEL_BODIES: IndexName[Mapping[str, Any]] = IndexName("llmmodel_bodies")
MODELS_BY_SOURCE: IndexName[str] = IndexName("models_by_source")
MODEL_DEPLOYMENTS: IndexName[ChildView] = IndexName("model_deployments")
MODEL_SERVICES: IndexName[ChildView] = IndexName("model_services")
MODEL_AUTOSCALERS: IndexName[ChildView] = IndexName("model_autoscalers")
CHILD_INDEXES = (MODEL_DEPLOYMENTS, MODEL_SERVICES, MODEL_AUTOSCALERS)


def llmmodel_body(body: Mapping[str, Any]) -> Entry:
    return object_key(body), trimmed_body(body, k.MODEL_API_VERSION, k.MODEL_KIND)


def model_by_source(body: Mapping[str, Any]) -> Entry:
    """Which models serve which TrainingJob, so that the job's changes reach the models waiting for it."""
    namespace, name = object_key(body)
    job = ((body.get("spec") or {}).get("source") or {}).get("trainingJob")
    return ((namespace, job), name) if job else None


def model_child(kind: str) -> IndexFunction:
    def view(body: Mapping[str, Any]) -> Entry:
        model = labels(body).get(k.LABEL_MODEL)
        return ((object_key(body)[0], model), child_view({**body, "kind": kind})) if model else None

    return view


def models_of_job(indexes: Indexes, job: Hashable) -> list[tuple[str, str]]:
    """The models that serve this TrainingJob: a change of the job may be what they wait for (a model serves its
    source job's checkpoints once the job succeeds)."""
    namespace = job[0]  # type: ignore[index]
    return [(namespace, name) for name in views(indexes, MODELS_BY_SOURCE, job)]


REGISTRATION = Registration(
    LLMMODELS,
    LLMMODEL_BODIES,
    owns=(
        Watch(LLMMODELS, "", {LLMMODEL_BODIES: llmmodel_body, MODELS_BY_SOURCE: model_by_source}),
        Watch(
            Resource("apps", "v1", "deployments", "Deployment"),
            MODEL_CHILDREN,
            {MODEL_DEPLOYMENTS: model_child("Deployment")},
        ),
        Watch(Resource("", "v1", "services", "Service"), MANAGED, {MODEL_SERVICES: model_child("Service")}),
        Watch(
            Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
            MODEL_CHILDREN,
            {MODEL_AUTOSCALERS: model_child("HorizontalPodAutoscaler")},
        ),
    ),
    watches=((TRAININGJOB_BODIES, models_of_job),),
    lookups=frozenset({MODELS_BY_SOURCE}),
)
