"""Available, Progressing and Degraded of an LLMModel, from its Deployment's rollout and its source.

As for a Deployment: Available says requests are being answered (at least one available server; reason
AllReplicasAvailable once all desired ones are), Progressing says a change is still under way (a rollout, or
waiting for the TrainingJob), Degraded says something needs a person (the source job failed, a child was rejected,
a name is taken, the rollout is stuck).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.serving.observed import ChildView
from trainingjob.serving.source import SourceState
from trainingjob.serving.types import LLMModel


def _deployment_condition(deployment: ChildView, condition_type: str) -> Mapping[str, Any]:
    for condition in deployment.status.get("conditions") or ():
        if condition.get("type") == condition_type:
            return condition
    return {}


def available(model: LLMModel, deployment: ChildView | None, source: SourceState) -> DesiredCondition:
    """True once at least one server is available (all of them: reason AllReplicasAvailable)."""
    desired = model.spec.replicas
    if deployment is None:
        reason = "WaitingForSource" if not source.ready else "DeploymentNotCreated"
        return DesiredCondition("Available", False, reason, "no model server runs yet")
    count = int(deployment.status.get("availableReplicas") or 0)
    message = f"{count}/{desired} replicas available"
    if desired == 0:
        return DesiredCondition("Available", False, "ScaledToZero", "replicas is 0: nothing serves")
    if count >= desired:
        return DesiredCondition("Available", True, "AllReplicasAvailable", message)
    if count > 0:
        return DesiredCondition("Available", True, "MinimumReplicasAvailable", message)
    return DesiredCondition("Available", False, "NoReplicasAvailable", message)


def progressing(model: LLMModel, deployment: ChildView | None, source: SourceState, changing: bool) -> DesiredCondition:
    if source.waiting is not None:
        return DesiredCondition("Progressing", True, "WaitingForTraining", source.waiting)
    if source.failed is not None:
        return DesiredCondition("Progressing", False, source.failed[0], source.failed[1])
    if deployment is None or changing:
        return DesiredCondition("Progressing", True, "Reconciling", "creating or updating the Deployment")
    stuck = _deployment_condition(deployment, "Progressing")
    if stuck.get("status") == "False":
        return DesiredCondition("Progressing", False, str(stuck.get("reason")), str(stuck.get("message") or ""))
    status = deployment.status
    desired = model.spec.replicas
    observed_generation = int(status.get("observedGeneration") or 0)
    done = (
        observed_generation >= deployment.generation
        and int(status.get("updatedReplicas") or 0) >= desired
        and int(status.get("availableReplicas") or 0) >= desired
        and int(status.get("replicas") or 0) == desired
    )
    if done:
        return DesiredCondition("Progressing", False, "RolloutComplete", f"{desired} replicas up to date")
    return DesiredCondition(
        "Progressing",
        True,
        "RollingOut",
        f"{int(status.get('updatedReplicas') or 0)} updated, {int(status.get('availableReplicas') or 0)} "
        f"available of {desired}",
    )


def degraded(
    deployment: ChildView | None, source: SourceState, taken: list[str], rejections: list[str]
) -> DesiredCondition:
    if source.failed is not None:
        return DesiredCondition("Degraded", True, source.failed[0], source.failed[1])
    if taken:
        return DesiredCondition("Degraded", True, "NameTaken", f"not ours, left alone: {', '.join(taken)}")
    if rejections:
        return DesiredCondition("Degraded", True, "ChildRejected", "; ".join(rejections)[:1024])
    if deployment is not None:
        for condition_type, status in (("ReplicaFailure", "True"), ("Progressing", "False")):
            found = _deployment_condition(deployment, condition_type)
            if found.get("status") == status:
                return DesiredCondition("Degraded", True, str(found.get("reason")), str(found.get("message") or ""))
    return DesiredCondition("Degraded", False, "AsExpected", "nothing needs attention")


def serving_conditions(
    model: LLMModel,
    deployment: ChildView | None,
    source: SourceState,
    taken: list[str],
    rejections: list[str],
    changing: bool,
    now: str,
) -> list[dict[str, Any]]:
    desired = [
        available(model, deployment, source),
        progressing(model, deployment, source, changing),
        degraded(deployment, source, taken, rejections),
    ]
    return merge_conditions(model.status.get("conditions") or [], desired, now, model.generation)
