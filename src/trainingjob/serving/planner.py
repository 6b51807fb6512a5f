"""Plan one LLMModel: which children to create, repair or delete, its status and Events. Pure, no I/O.

The model's Deployment, Service and (with spec.autoscaling) HorizontalPodAutoscaler are compared with what the
caches hold: a missing child is created, one whose spec hash or compared fields differ is put back (someone edited
it: drift), an autoscaler no longer wanted is deleted. A model whose source is a TrainingJob gets no Deployment
until that job has Succeeded, so the server only ever starts on a final checkpoint.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.times import format_time
from trainingjob.config import ServingConfig
from trainingjob.planning.actions import Action, CreateChild, DeleteChild, Event, ReplaceChild
from trainingjob.planning.plan import Plan
from trainingjob.serving import builders
from trainingjob.serving.conditions import serving_conditions
from trainingjob.serving.observed import ESSENCES, ObservedServing
from trainingjob.serving.source import SourceState, resolve_source, source_events, source_status
from trainingjob.serving.types import LLMModel


def desired_children(model: LLMModel, config: ServingConfig, source: SourceState) -> dict[str, dict[str, Any]]:
    """By kind; no Deployment while the source is not ready (the Service may exist: it has no endpoints yet)."""
    children = {"Service": builders.service(model)}
    if source.ready:
        children["Deployment"] = builders.deployment(model, config, source.claim_name, source.store, source.run_dir)
    scaler = builders.autoscaler(model)
    if scaler is not None:
        children["HorizontalPodAutoscaler"] = scaler
    return children


@dataclass(frozen=True)
class ChildChanges:
    """What comparing the children decided: creates, repairs and deletes with their Events, and the children
    another owner holds (`taken`, which the Degraded condition names)."""

    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)


def child_actions(model: LLMModel, desired: Mapping[str, dict[str, Any]], observed: ObservedServing) -> ChildChanges:
    """Creates, repairs and deletes of the model's children, and the names of children another owner holds."""
    changes = ChildChanges()
    actions, events, taken = changes.actions, changes.events, changes.taken
    for kind, manifest in desired.items():
        current = observed.children.get(kind)
        if current is None:
            actions.append(CreateChild(manifest))  # its Created Event comes from the applier, once created
            continue
        if current.controller_uid != model.uid:
            taken.append(f"{kind} {current.name}")
            continue
        wanted_hash = manifest["metadata"]["labels"][builders.LABEL_SPEC_HASH]
        if current.spec_hash != wanted_hash:
            actions.append(ReplaceChild(manifest))
            events.append(Event("Normal", "Updated", f"updated {kind} {current.name} to the model's spec"))
        elif ESSENCES[kind](manifest) != current.essence:
            actions.append(ReplaceChild(manifest))
            events.append(
                Event("Warning", "DriftRepaired", f"{kind} {current.name} was changed by someone else; put back")
            )
    for kind, current in observed.children.items():
        if kind not in desired and current.controller_uid == model.uid and kind == "HorizontalPodAutoscaler":
            actions.append(DeleteChild(kind, current.name, uid=current.uid, api_version="autoscaling/v2"))
            events.append(Event("Normal", "Deleted", f"deleted {kind} {current.name}: autoscaling removed"))
    return changes


def plan_model(
    model: LLMModel, observed: ObservedServing, config: ServingConfig, now: datetime.datetime
) -> Plan[dict[str, Any]]:
    """The whole plan for one model; `now` stamps condition transitions. The status keeps the stored shape (the
    LLMModel's status is read and written as the API server holds it)."""
    if model.deleting:
        return Plan(status=dict(model.status))  # garbage collection removes the children with the model
    source = resolve_source(model, observed)
    changes = child_actions(model, desired_children(model, config, source), observed)
    deployment = observed.children.get("Deployment") if source.ready else None
    rollout = dict(deployment.status) if deployment is not None else {}
    status: dict[str, Any] = {
        "observedGeneration": model.generation,
        "replicas": int(rollout.get("replicas") or 0),
        "readyReplicas": int(rollout.get("readyReplicas") or 0),
        "availableReplicas": int(rollout.get("availableReplicas") or 0),
        "updatedReplicas": int(rollout.get("updatedReplicas") or 0),
        "selector": builders.selector_string(model),
        "url": builders.service_url(model),
        "modelName": model.spec.model_name,
    }
    source_view = source_status(model, source)
    if source_view is not None:
        status["source"] = source_view
    changing = any(isinstance(a, CreateChild | ReplaceChild) and a.kind == "Deployment" for a in changes.actions)
    status["conditions"] = serving_conditions(
        model, deployment, source, changes.taken, list(observed.rejections), changing, format_time(now)
    )
    return Plan(status=status, actions=changes.actions, events=[*changes.events, *source_events(model, source)])
