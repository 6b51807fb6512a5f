"""LLMModel in the operator: read the caches, run the pure serving planner, apply its plan.

It shares the TrainingJob reconciler's work queue, workers and write limit; its keys are ("LLMModel", namespace,
name), three items, so they never collide with a job's (namespace, name). The Reconciler hands such keys here.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.types import format_time
from trainingjob.operator.apply import is_invalid_child, status_patch
from trainingjob.operator.calls import MERGE_PATCH, record_event, unread
from trainingjob.operator.logs import reconcile_context
from trainingjob.reconcile.actions import CreateChild, DeleteChild, Event, Plan, ReplaceChild
from trainingjob.serving.observed import ObservedServing, source_job
from trainingjob.serving.planner import plan_model
from trainingjob.serving.types import LLMModel, ServingConfig

logger = logging.getLogger(__name__)
ModelKey = tuple[str, str, str]
# Index names (watches.py): model bodies, their children by (namespace, model), models by their source job.
CHILD_INDEXES = ("model_deployments", "model_services", "model_autoscalers")
MODEL_INDEXES = ("llmmodel_bodies", *CHILD_INDEXES, "models_by_source")


def model_key(namespace: str, name: str) -> ModelKey:
    return (k.MODEL_KIND, namespace, name)


def is_model_key(key: tuple) -> bool:
    return len(key) == 3 and key[0] == k.MODEL_KIND


def _values(index: Mapping[Any, Any], key: Any) -> list[Any]:
    store = index.get(key)
    return list(store) if store is not None else []


@dataclass(frozen=True)
class ChildOutcome:
    """What one child action did: `created` only when this call made the object (not when it already existed),
    `rejection` when the API server found the manifest invalid."""

    created: bool = False
    rejection: str = ""


def creation_events(actions: Sequence[Any], outcomes: Sequence[ChildOutcome]) -> list[Event]:
    """A `Created` Event per child this apply really created. A create retried while the cache still lags behind
    the first one finds the object there (409): no second Event for it."""
    return [
        Event("Normal", "Created", f"created {action.kind} {action.name}")
        for action, outcome in zip(actions, outcomes, strict=True)
        if outcome.created
    ]


class ServingApplier:
    """Every API write for LLMModels: children through their own APIs, the model's status, Events."""

    def __init__(self, api: client.ApiClient, write_slots: asyncio.Semaphore) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.autoscaling = client.AutoscalingV2Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.write_slots = write_slots

    async def apply(self, model: LLMModel, body: Mapping[str, Any], plan: Plan) -> list[str]:
        """Status first (a stale plan is refused by its resourceVersion before any child is touched), then children
        and Events; the refusals of children the API server found invalid (422) are returned."""
        if plan.status != dict(model.status):
            try:
                await self.write_status(model, body, plan.status)
            except ApiException as error:
                if error.status in (404, 409):
                    return []  # a newer model is on its way through the watch
                raise
        outcomes = await asyncio.gather(*(self.apply_child(model, action) for action in plan.actions))
        events = [*plan.events, *creation_events(plan.actions, outcomes)]
        await asyncio.gather(*(self.record_event(model, event) for event in events))
        return [outcome.rejection for outcome in outcomes if outcome.rejection]

    async def write_status(self, model: LLMModel, body: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        patch = {
            "metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
            "status": status_patch(model.status, status),
        }
        await unread(
            self.custom.patch_namespaced_custom_object_status,
            k.MODEL_GROUP,
            k.MODEL_VERSION,
            model.namespace,
            k.MODEL_PLURAL,
            model.name,
            patch,
            _content_type=MERGE_PATCH,
        )

    async def apply_child(self, model: LLMModel, action: Any) -> ChildOutcome:
        async with self.write_slots:
            try:
                await self._apply_child(model.namespace, action)
            except ApiException as error:
                if isinstance(action, CreateChild) and error.status == 409:
                    return ChildOutcome()  # exists; the cache shows it soon and the next plan compares it
                if isinstance(action, DeleteChild | ReplaceChild) and error.status in (404, 409):
                    return ChildOutcome()
                if isinstance(action, CreateChild | ReplaceChild) and is_invalid_child(error):
                    rejection = f"{action.kind} {action.name} was rejected: {error.reason}: {str(error.body)[:300]}"
                    return ChildOutcome(rejection=rejection)
                raise
        return ChildOutcome(created=isinstance(action, CreateChild))

    async def _apply_child(self, ns: str, action: Any) -> None:
        if isinstance(action, DeleteChild):
            options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=action.uid))
            await unread(self.autoscaling.delete_namespaced_horizontal_pod_autoscaler, action.name, ns, body=options)
            return
        manifest = action.manifest
        if isinstance(action, CreateChild):
            create = {
                "Deployment": self.apps.create_namespaced_deployment,
                "Service": self.core.create_namespaced_service,
                "HorizontalPodAutoscaler": self.autoscaling.create_namespaced_horizontal_pod_autoscaler,
            }[action.kind]
            await unread(create, ns, manifest)
            return
        patch_child: Callable[..., Any] = {
            "Deployment": self.apps.patch_namespaced_deployment,
            "Service": self.core.patch_namespaced_service,
            "HorizontalPodAutoscaler": self.autoscaling.patch_namespaced_horizontal_pod_autoscaler,
        }[action.kind]
        # A merge patch: lists we own (containers, ports, tolerations) are replaced whole; what the API server
        # allocated (clusterIP) or defaulted elsewhere stays.
        patch = {"metadata": {"labels": manifest["metadata"]["labels"]}, "spec": manifest["spec"]}
        await unread(patch_child, action.name, ns, patch, _content_type=MERGE_PATCH)

    async def record_event(self, model: LLMModel, event: Event) -> None:
        involved = (k.MODEL_API_VERSION, k.MODEL_KIND, model.namespace, model.name, model.uid)
        await record_event(self.core, involved, event)


class ServingReconciler:
    """Plans one model from the caches and applies the plan; remembers only rejections between reconciles."""

    def __init__(
        self,
        indexes: Mapping[str, Mapping[Any, Any]],
        applier: ServingApplier,
        config: ServingConfig,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.indexes = indexes
        self.applier = applier
        self.config = config
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.rejections: dict[ModelKey, tuple[str, ...]] = {}

    def keys(self) -> list[ModelKey]:
        return [model_key(ns, name) for ns, name in list(self.indexes["llmmodel_bodies"])]

    def models_of_job(self, namespace: str, job: str) -> list[ModelKey]:
        """The models that serve this TrainingJob: a change of the job may be what they wait for."""
        return [model_key(namespace, name) for name in _values(self.indexes["models_by_source"], (namespace, job))]

    def observed(self, model: LLMModel) -> ObservedServing:
        # Another owner's namesake is kept too: the planner reports it (NameTaken) instead of fighting over it.
        children = {
            view.kind: view
            for index in CHILD_INDEXES
            for view in _values(self.indexes[index], (model.namespace, model.name))
        }
        job = None
        if model.spec.source is not None and model.spec.source.training_job:
            bodies = _values(self.indexes["trainingjob_bodies"], (model.namespace, model.spec.source.training_job))
            job = source_job(bodies[0] if bodies else None)
        key = model_key(model.namespace, model.name)
        return ObservedServing(children=children, job=job, rejections=self.rejections.get(key, ()))

    async def reconcile(self, key: ModelKey) -> None:
        _, namespace, name = key
        with reconcile_context(namespace, name):
            bodies = _values(self.indexes["llmmodel_bodies"], (namespace, name))
            if not bodies:
                self.rejections.pop(key, None)
                return
            body = bodies[0]
            model = LLMModel.from_body(body)
            plan = plan_model(model, self.observed(model), self.config, format_time(self.clock()))
            rejections = await self.applier.apply(model, body, plan)
            if rejections:
                self.rejections[key] = tuple(rejections)
            elif any(isinstance(a, CreateChild | ReplaceChild) for a in plan.actions):
                self.rejections.pop(key, None)
            if plan.actions:
                logger.info("model reconciled: %d action(s)", len(plan.actions))
