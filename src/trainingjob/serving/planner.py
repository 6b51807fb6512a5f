"""Plan one LLMModel: which children to create, repair or delete, its status and Events. Pure, no I/O.

The model's Deployment, Service and (with spec.autoscaling) HorizontalPodAutoscaler are compared with what the
caches hold: a missing child is created, one whose spec hash or compared fields differ is put back (someone edited
it: drift), an autoscaler no longer wanted is deleted. A model whose source is a TrainingJob gets no Deployment
until that job has Succeeded, so the server only ever starts on a final checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.config import ServingConfig
from trainingjob.reconcile.actions import CreateChild, DeleteChild, Event, Plan, ReplaceChild
from trainingjob.serving import builders
from trainingjob.serving.conditions import serving_conditions
from trainingjob.serving.observed import ESSENCES, ObservedServing
from trainingjob.serving.types import LLMModel


@dataclass(frozen=True)
class SourceState:
    """Where the model is, or why there is nothing to serve yet."""

    claim_name: str | None
    ready: bool
    waiting: str | None = None  # Progressing: e.g. the TrainingJob still runs
    failed: tuple[str, str] | None = None  # Degraded: (reason, message)
    job_phase: str | None = None


def resolve_source(model: LLMModel, observed: ObservedServing) -> SourceState:
    source = model.spec.source
    if source is None:
        return SourceState(claim_name=None, ready=True)
    if source.claim_name:
        return SourceState(claim_name=source.claim_name, ready=True)
    job, name = observed.job, source.training_job
    if job is None:
        return SourceState(None, False, waiting=f"waiting for TrainingJob {name}, which does not exist (yet)")
    if job.phase == "Failed":
        return SourceState(None, False, failed=("TrainingFailed", f"TrainingJob {name} failed"), job_phase=job.phase)
    if job.claim_name is None:
        message = f"TrainingJob {name} keeps no checkpoints on a volume (spec.checkpoint.storage type pvc)"
        return SourceState(None, False, failed=("NoCheckpointVolume", message), job_phase=job.phase)
    if job.phase != "Succeeded":
        waiting = f"waiting for TrainingJob {name} to succeed (phase {job.phase})"
        return SourceState(None, False, waiting=waiting, job_phase=job.phase)
    return SourceState(claim_name=job.claim_name, ready=True, job_phase=job.phase)


def desired_children(model: LLMModel, config: ServingConfig, source: SourceState) -> dict[str, dict[str, Any]]:
    """By kind; no Deployment while the source is not ready (the Service may exist: it has no endpoints yet)."""
    children = {"Service": builders.service(model)}
    if source.ready:
        children["Deployment"] = builders.deployment(model, config, source.claim_name)
    scaler = builders.autoscaler(model)
    if scaler is not None:
        children["HorizontalPodAutoscaler"] = scaler
    return children


def child_actions(
    model: LLMModel, desired: Mapping[str, dict[str, Any]], observed: ObservedServing, plan: Plan
) -> list[str]:
    """Append creates, repairs and deletes to `plan`; the names of children another owner holds."""
    taken = []
    for kind, manifest in desired.items():
        current = observed.children.get(kind)
        if current is None:
            plan.actions.append(CreateChild(manifest))  # its Created Event comes from the applier, once created
            continue
        if current.controller_uid != model.uid:
            taken.append(f"{kind} {current.name}")
            continue
        wanted_hash = manifest["metadata"]["labels"][builders.LABEL_SPEC_HASH]
        if current.spec_hash != wanted_hash:
            plan.actions.append(ReplaceChild(manifest))
            plan.events.append(Event("Normal", "Updated", f"updated {kind} {current.name} to the model's spec"))
        elif ESSENCES[kind](manifest) != current.essence:
            plan.actions.append(ReplaceChild(manifest))
            plan.events.append(
                Event("Warning", "DriftRepaired", f"{kind} {current.name} was changed by someone else; put back")
            )
    for kind, current in observed.children.items():
        if kind not in desired and current.controller_uid == model.uid and kind == "HorizontalPodAutoscaler":
            plan.actions.append(DeleteChild(kind, current.name, uid=current.uid, api_version="autoscaling/v2"))
            plan.events.append(Event("Normal", "Deleted", f"deleted {kind} {current.name}: autoscaling removed"))
    return taken


def source_events(model: LLMModel, source: SourceState) -> list[Event]:
    """An Event when the source job's phase reaches a verdict the model has not reported yet."""
    if model.spec.source is None or model.spec.source.training_job is None:
        return []
    before = (model.status.get("source") or {}).get("jobPhase")
    if source.job_phase == before:
        return []
    name = model.spec.source.training_job
    if source.job_phase == "Succeeded":
        return [Event("Normal", "SourceReady", f"TrainingJob {name} succeeded; serving its final checkpoint")]
    if source.job_phase == "Failed":
        return [Event("Warning", "TrainingFailed", f"TrainingJob {name} failed; nothing to serve")]
    return []


def source_status(model: LLMModel, source: SourceState) -> dict[str, Any] | None:
    spec = model.spec.source
    if spec is None:
        return None
    status: dict[str, Any] = {}
    if spec.training_job:
        status["trainingJob"] = spec.training_job
        status["jobPhase"] = source.job_phase or "Unknown"
    if source.claim_name:
        status["claimName"] = source.claim_name
    if spec.path:
        status["path"] = spec.path
    return status


def plan_model(model: LLMModel, observed: ObservedServing, config: ServingConfig, now: str) -> Plan:
    """The whole plan for one model; `now` stamps condition transitions."""
    plan = Plan(status=dict(model.status))
    if model.deleting:
        return plan  # garbage collection removes the children with the model
    source = resolve_source(model, observed)
    desired = desired_children(model, config, source)
    taken = child_actions(model, desired, observed, plan)
    plan.events.extend(source_events(model, source))
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
    }
    source_view = source_status(model, source)
    if source_view is not None:
        status["source"] = source_view
    changing = any(isinstance(a, CreateChild | ReplaceChild) and a.kind == "Deployment" for a in plan.actions)
    status["conditions"] = serving_conditions(
        model, deployment, source, taken, list(observed.rejections), changing, now
    )
    plan.status = status
    return plan
