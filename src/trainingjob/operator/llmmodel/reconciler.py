"""LLMModel in the operator: read the caches, run the pure serving planner, apply its plan (apply.py).

Its own controller (work queue and workers), registered in watches.py; its keys are the models' (namespace, name).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Hashable

from trainingjob.api.times import format_time
from trainingjob.config import ServingConfig
from trainingjob.operator.llmmodel.apply import ServingApplier
from trainingjob.operator.llmmodel.watches import CHILD_INDEXES, LLMMODEL_BODIES, REGISTRATION
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.runtime.controller import Controller
from trainingjob.operator.runtime.store import Indexes, views
from trainingjob.operator.trainingjob.watches import TRAININGJOB_BODIES
from trainingjob.reconcile.actions import CreateChild, ReplaceChild
from trainingjob.serving.observed import ObservedServing, source_job
from trainingjob.serving.planner import plan_model
from trainingjob.serving.types import LLMModel

logger = logging.getLogger(__name__)
ModelKey = tuple[str, str]
# Models are few and their reconciles short: a small pool of their own, beside the jobs'.
MODEL_WORKERS = 4


class ServingReconciler:
    """Plans one model from the caches and applies the plan; remembers only rejections between reconciles."""

    def __init__(
        self,
        indexes: Indexes,
        applier: ServingApplier,
        config: ServingConfig,
        clock: Callable[[], datetime.datetime] | None = None,
        resync_seconds: float = 0,
        metrics: object = None,
    ) -> None:
        self.indexes = indexes
        self.applier = applier
        self.config = config
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.rejections: dict[ModelKey, tuple[str, ...]] = {}
        self.controller = Controller(REGISTRATION, self.reconcile, MODEL_WORKERS, resync_seconds, metrics)

    def observed(self, model: LLMModel) -> ObservedServing:
        # Another owner's namesake is kept too: the planner reports it (NameTaken) instead of fighting over it.
        key = (model.namespace, model.name)
        children = {view.kind: view for index in CHILD_INDEXES for view in views(self.indexes, index, key)}
        job = None
        if model.spec.source is not None and model.spec.source.training_job:
            bodies = views(self.indexes, TRAININGJOB_BODIES, (model.namespace, model.spec.source.training_job))
            job = source_job(bodies[0] if bodies else None)
        return ObservedServing(children=children, job=job, rejections=self.rejections.get(key, ()))

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = key  # type: ignore[misc]
        with reconcile_context(namespace, name):
            bodies = views(self.indexes, LLMMODEL_BODIES, key)
            if not bodies:
                self.rejections.pop((namespace, name), None)
                return
            body = bodies[0]
            model = LLMModel.from_body(body)
            plan = plan_model(model, self.observed(model), self.config, format_time(self.clock()))
            rejections = await self.applier.apply(model, body, plan)
            if rejections:
                self.rejections[(namespace, name)] = tuple(rejections)
            elif any(isinstance(a, CreateChild | ReplaceChild) for a in plan.actions):
                self.rejections.pop((namespace, name), None)
            if plan.actions:
                logger.info("model reconciled: %d action(s)", len(plan.actions))
