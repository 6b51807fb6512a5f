"""An LLMModel as the planner reads it: the spec's fields, typed, with the schema's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.kube.meta import object_meta


@dataclass(frozen=True)
class ModelSource:
    training_job: str | None = None
    claim_name: str | None = None
    path: str | None = None
    uri: str | None = None  # s3://bucket/prefix: the newest checkpoint there is served
    secret_name: str | None = None  # with uri: the Secret whose keys become the server's environment


@dataclass(frozen=True)
class ModelStore:
    """Checkpoints in S3 a server loads its model from: the s3:// URI and the Secret with its credentials."""

    uri: str
    secret_name: str | None = None


@dataclass(frozen=True)
class Autoscaling:
    min_replicas: int = 1
    max_replicas: int = 1
    target_cpu_percent: int = 80


@dataclass(frozen=True)
class ModelSpec:
    model_name: str
    replicas: int = 1
    gpu_type: str | None = None
    gpus_per_replica: int = 1
    image: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    port: int = k.DEFAULT_SERVING_PORT
    env: tuple[tuple[str, str], ...] = ()
    resources: Mapping[str, Any] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    source: ModelSource | None = None
    autoscaling: Autoscaling | None = None


@dataclass(frozen=True)
class LLMModel:
    name: str
    namespace: str
    uid: str
    generation: int
    spec: ModelSpec
    status: Mapping[str, Any]
    deleting: bool = False

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> LLMModel:
        meta = object_meta(body)
        spec = body.get("spec") or {}
        source = spec.get("source")
        scaling = spec.get("autoscaling")
        scheduling = spec.get("scheduling") or {}
        return cls(
            name=meta.name,
            namespace=meta.namespace or "default",
            uid=meta.uid,
            generation=meta.generation,
            deleting=meta.deleting,
            status=dict(body.get("status") or {}),
            spec=ModelSpec(
                model_name=str(spec.get("modelName") or meta.name),
                replicas=int(spec.get("replicas", 1)),
                gpu_type=spec.get("gpuType") or None,
                gpus_per_replica=int(spec.get("gpusPerReplica", 1)),
                image=spec.get("image") or None,
                command=tuple(spec.get("command") or ()),
                args=tuple(spec.get("args") or ()),
                port=int(spec.get("port", k.DEFAULT_SERVING_PORT)),
                env=tuple((e["name"], str(e.get("value", ""))) for e in spec.get("env") or ()),
                resources=dict(spec.get("resources") or {}),
                node_selector=dict(scheduling.get("nodeSelector") or {}),
                tolerations=tuple(scheduling.get("tolerations") or ()),
                source=ModelSource(
                    source.get("trainingJob"),
                    source.get("claimName"),
                    source.get("path"),
                    source.get("uri"),
                    source.get("secretName"),
                )
                if source
                else None,
                autoscaling=Autoscaling(
                    int(scaling.get("minReplicas", 1)),
                    int(scaling["maxReplicas"]),
                    int(scaling.get("targetCPUUtilizationPercentage", 80)),
                )
                if scaling
                else None,
            ),
        )
