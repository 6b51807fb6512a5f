"""LLMModel in the operator: read the caches, run the pure serving planner, apply its plan (apply.py).

Its own controller (work queue and workers), registered in watches.py; its keys are the models' (namespace, name).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from trainingjob.config import ServingConfig
from trainingjob.kube.reflector import ObjectKey
from trainingjob.operator.llmmodel.apply import ServingApplier
from trainingjob.operator.llmmodel.watches import CHILD_INDEXES, LLMMODEL_BODIES, REGISTRATION
from trainingjob.operator.runtime.objects import Clock, ObjectReconciler
from trainingjob.operator.runtime.store import Indexes, views
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES
from trainingjob.planning.actions import CreateChild, ReplaceChild
from trainingjob.serving.observed import ObservedServing, source_job
from trainingjob.serving.planner import plan_model
from trainingjob.serving.types import LLMModel

logger = logging.getLogger(__name__)
# Models are few and their reconciles short: a small pool of their own, beside the jobs'.
MODEL_WORKERS = 4


class ServingReconciler(ObjectReconciler):
    """Plans one model from the caches and applies the plan; remembers only rejections between reconciles."""

    BODIES = LLMMODEL_BODIES
    REGISTRATION = REGISTRATION
    WORKERS = MODEL_WORKERS

    def __init__(
        self,
        indexes: Indexes,
        applier: ServingApplier,
        config: ServingConfig,
        clock: Clock | None = None,
        resync_seconds: float = 0,
        metrics: object = None,
    ) -> None:
        self.applier = applier
        self.config = config
        self.rejections: dict[ObjectKey, tuple[str, ...]] = {}
        super().__init__(indexes, clock, resync_seconds, metrics)

    def observed(self, model: LLMModel) -> ObservedServing:
        # Another owner's namesake is kept too: the planner reports it (NameTaken) instead of fighting over it.
        key = (model.namespace, model.name)
        children = {view.kind: view for index in CHILD_INDEXES for view in views(self.indexes, index, key)}
        job = None
        if model.spec.source is not None and model.spec.source.training_job:
            bodies = views(self.indexes, TRAININGJOB_BODIES, (model.namespace, model.spec.source.training_job))
            job = source_job(bodies[0] if bodies else None)
        return ObservedServing(children=children, job=job, rejections=self.rejections.get(key, ()))

    def forget(self, key: ObjectKey) -> None:
        self.rejections.pop(key, None)

    async def reconcile_body(self, key: ObjectKey, body: Mapping[str, Any]) -> None:
        model = LLMModel.from_body(body)
        plan = plan_model(model, self.observed(model), self.config, self.clock())
        rejections = await self.applier.apply(model, body, plan)
        if rejections:
            self.rejections[key] = tuple(rejections)
        elif any(isinstance(a, CreateChild | ReplaceChild) for a in plan.actions):
            self.rejections.pop(key, None)
        if plan.actions:
            logger.info("model reconciled: %d action(s)", len(plan.actions))
