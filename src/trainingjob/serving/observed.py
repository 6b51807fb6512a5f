"""What the operator's caches hold about a model's children and its source, trimmed to what the planner compares.

The same `*_essence` function is applied to the manifest the builders make and to the object the API server holds,
so drift is a plain inequality: only fields we set and the API server does not rewrite are compared. Fields it
normalizes (resource quantities) are covered by the spec hash label instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.status import Phase
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pvc import checkpoint_claim_name
from trainingjob.serving.builders import LABEL_SPEC_HASH
from trainingjob.serving.types import ModelStore


def _controller_uid(metadata: Mapping[str, Any]) -> str | None:
    for reference in metadata.get("ownerReferences") or ():
        if reference.get("controller"):
            return str(reference.get("uid"))
    return None


def _container_essence(container: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": container.get("name"),
        "image": container.get("image"),
        "command": list(container.get("command") or []),
        "args": list(container.get("args") or []),
        "env": [(e.get("name"), e.get("value", "")) for e in container.get("env") or []],
        "ports": [p.get("containerPort") for p in container.get("ports") or []],
        "mounts": [
            (m.get("name"), m.get("mountPath"), m.get("subPath", ""), bool(m.get("readOnly")))
            for m in container.get("volumeMounts") or []
        ],
    }


def deployment_essence(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") or {}
    template = spec.get("template") or {}
    pod = template.get("spec") or {}
    return {
        "replicas": spec.get("replicas", 1),
        "selector": dict((spec.get("selector") or {}).get("matchLabels") or {}),
        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
        "nodeSelector": dict(pod.get("nodeSelector") or {}),
        "tolerations": [dict(t) for t in pod.get("tolerations") or []],
        "volumes": [
            (v.get("name"), (v.get("persistentVolumeClaim") or {}).get("claimName")) for v in pod.get("volumes") or []
        ],
        "containers": [_container_essence(c) for c in pod.get("containers") or []],
    }


def service_essence(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") or {}
    return {
        "selector": dict(spec.get("selector") or {}),
        "ports": [(p.get("name"), p.get("port"), str(p.get("targetPort"))) for p in spec.get("ports") or []],
    }


def autoscaler_essence(body: Mapping[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") or {}
    return {key: spec.get(key) for key in ("scaleTargetRef", "minReplicas", "maxReplicas", "metrics")}


ESSENCES = {"Deployment": deployment_essence, "Service": service_essence, "HorizontalPodAutoscaler": autoscaler_essence}


@dataclass(frozen=True)
class ChildView:
    """One child as cached: identity, what we compare, and (Deployments) the rollout's status."""

    kind: str
    name: str
    uid: str
    controller_uid: str | None
    spec_hash: str | None
    essence: Mapping[str, Any]
    status: Mapping[str, Any] = field(default_factory=dict)
    generation: int = 0


def child_view(body: Mapping[str, Any]) -> ChildView:
    meta = body.get("metadata") or {}
    kind = str(body.get("kind") or "")
    return ChildView(
        kind=kind,
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        controller_uid=_controller_uid(meta),
        spec_hash=(meta.get("labels") or {}).get(LABEL_SPEC_HASH),
        essence=ESSENCES[kind](body),
        status=dict(body.get("status") or {}) if kind == "Deployment" else {},
        generation=int(meta.get("generation") or 0),
    )


@dataclass(frozen=True)
class SourceJob:
    """The TrainingJob a model names as its source, as far as serving cares."""

    phase: Phase
    claim_name: str | None
    store: ModelStore | None = None  # its checkpoints are in S3 (checkpoint.storage type s3), its run's prefix
    # The directory in the claim its run wrote its checkpoints to (its uid: builders/env.run_checkpoint_dir).
    run_dir: str = ""


def source_job(body: Mapping[str, Any] | None) -> SourceJob | None:
    """From the TrainingJob cache (internal shape): its phase and where its run's checkpoints are (a directory in a
    claim, or a prefix in S3)."""
    if body is None:
        return None
    job = TrainingJob.from_body(body)
    storage = job.spec.checkpoint.storage
    in_s3 = job.spec.checkpoint.enabled and storage is not None and storage.type == "s3" and storage.path
    uri = f"{storage.path.rstrip('/')}/{job.uid}" if in_s3 and storage is not None and storage.path else ""
    store = ModelStore(uri, storage.secret_name) if uri and storage is not None else None
    phase = job.status.phase or Phase.PENDING
    return SourceJob(phase=phase, claim_name=checkpoint_claim_name(job), store=store, run_dir=job.uid)


@dataclass(frozen=True)
class ObservedServing:
    children: Mapping[str, ChildView] = field(default_factory=dict)  # by kind
    job: SourceJob | None = None
    rejections: tuple[str, ...] = ()


KINDS = tuple(ESSENCES)
