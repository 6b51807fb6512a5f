"""An LLMModel's plan, executed through the one writer (operator/runtime/writer.py): the model's status first (a
stale plan is refused by its resourceVersion before any child is touched), then its children and Events."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.llmmodel.watches import LLMMODELS
from trainingjob.operator.runtime.writer import AdmissionRefused, Outcome, Writer, Written, status_patch
from trainingjob.planning.actions import CreateChild, DeleteChild, Event
from trainingjob.planning.plan import Plan
from trainingjob.serving.types import LLMModel


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

    async def apply(self, model: LLMModel, body: Mapping[str, Any], plan: Plan[dict[str, Any]]) -> list[str]:
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
            return await self.writer.delete(namespace, action.kind, action.name, action.uid)
        if isinstance(action, CreateChild):
            return await self.writer.create(namespace, action.manifest)
        # A merge patch: lists we own (containers, ports, tolerations) are replaced whole; what the API server
        # allocated (clusterIP) or defaulted elsewhere stays.
        manifest = action.manifest
        patch = {"metadata": {"labels": manifest["metadata"]["labels"]}, "spec": manifest["spec"]}
        return await self.writer.patch(namespace, action.kind, action.name, patch)
