"""LLMModel in the operator: read the caches, run the pure serving planner, apply its plan.

It shares the TrainingJob reconciler's work queue, workers and write limit; its keys are ("LLMModel", namespace,
name), three items, so they never collide with a job's (namespace, name). The Reconciler hands such keys here.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.types import format_time
from trainingjob.config import ServingConfig
from trainingjob.kube.reflector import Resource
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.runtime.writer import Outcome, Writer, Written, status_patch
from trainingjob.reconcile.actions import CreateChild, DeleteChild, Event, Plan, ReplaceChild
from trainingjob.serving.observed import ObservedServing, source_job
from trainingjob.serving.planner import plan_model
from trainingjob.serving.types import LLMModel

logger = logging.getLogger(__name__)
ModelKey = tuple[str, str, str]
LLMMODELS = Resource(k.MODEL_GROUP, k.MODEL_VERSION, k.MODEL_PLURAL, k.MODEL_KIND)
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


class AdmissionRefused(Exception):
    """Admission refused a child of a model for now (quota, a webhook): the reconcile is retried with backoff."""


def creation_events(actions: Sequence[Any], outcomes: Sequence[Written]) -> list[Event]:
    """A `Created` Event per child this apply really created. A create retried while the cache still lags behind
    the first one finds the object there (409): no second Event for it."""
    return [
        Event("Normal", "Created", f"created {action.kind} {action.name}")
        for action, written in zip(actions, outcomes, strict=True)
        if isinstance(action, CreateChild) and written.outcome is Outcome.DONE
    ]


class ServingApplier:
    """Executes LLMModel plans through the one writer: the model's status, its children, Events."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    async def apply(self, model: LLMModel, body: Mapping[str, Any], plan: Plan) -> list[str]:
        """Status first (a stale plan is refused by its resourceVersion before any child is touched), then children
        and Events; the refusals of children the API server found invalid (422) are returned."""
        if plan.status != dict(model.status):
            try:
                patch = status_patch(model.status, plan.status)
                await self.writer.patch_status(
                    LLMMODELS, model.namespace, model.name, body["metadata"]["resourceVersion"], patch
                )
            except ApiException as error:
                if error.status in (404, 409):
                    return []  # a newer model is on its way through the watch
                raise
        outcomes = await asyncio.gather(*(self.apply_child(model.namespace, action) for action in plan.actions))
        events = [*plan.events, *creation_events(plan.actions, outcomes)]
        obj = (model.namespace, model.name, model.uid)
        await asyncio.gather(*(self.writer.record_event(LLMMODELS, obj, event) for event in events))
        denied = [written.message for written in outcomes if written.outcome is Outcome.DENIED]
        if denied:
            raise AdmissionRefused("; ".join(denied))
        return [written.message for written in outcomes if written.outcome is Outcome.REJECTED]

    async def apply_child(self, namespace: str, action: Any) -> Written:
        if isinstance(action, DeleteChild):
            return await self.writer.delete(namespace, action.api_version, action.kind, action.name, action.uid)
        if isinstance(action, CreateChild):
            return await self.writer.create(namespace, action.manifest)
        # A merge patch: lists we own (containers, ports, tolerations) are replaced whole; what the API server
        # allocated (clusterIP) or defaulted elsewhere stays.
        manifest = action.manifest
        patch = {"metadata": {"labels": manifest["metadata"]["labels"]}, "spec": manifest["spec"]}
        return await self.writer.patch(namespace, action.kind, action.name, patch)


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
