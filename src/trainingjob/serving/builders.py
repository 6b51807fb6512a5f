"""The children of an LLMModel: a Deployment of model servers, a Service in front of them, optionally an autoscaler.

Pure functions of the model and the operator's serving settings. Every child is named after the model, carries
our labels and a controller ownerReference (garbage collection removes it with the model), and records the hash of
what it was built from (so a spec change is seen even in fields the API server normalizes, such as quantities).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.builders.common import controller_reference
from trainingjob.config import ServingConfig
from trainingjob.serving.types import LLMModel, ModelStore

LABEL_SPEC_HASH = f"{k.MODEL_GROUP}/spec-hash"
SERVICE_PORT = 80
MODEL_VOLUME = "model"
# The SDK's model server (trainingjob.sdk.serving) reads these; any other server may ignore them.
ENV_MODEL_NAME, ENV_MODEL_DIR, ENV_PORT = "MODEL_NAME", "MODEL_DIR", "PORT"
HEALTH_PATH = "/v2/health/ready"


def selector_labels(model: LLMModel) -> dict[str, str]:
    """The serving pods' labels that the Deployment and the Service select by (status.selector too)."""
    return {k.LABEL_MODEL: model.name}


def selector_string(model: LLMModel) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(selector_labels(model).items()))


def owner_reference(model: LLMModel) -> dict[str, Any]:
    return controller_reference(k.MODEL_API_VERSION, k.MODEL_KIND, model.name, model.uid)


def metadata(model: LLMModel, spec_hash: str) -> dict[str, Any]:
    return {
        "name": model.name,
        "namespace": model.namespace,
        "labels": {k.LABEL_MANAGED_BY: k.MANAGED_BY, **selector_labels(model), LABEL_SPEC_HASH: spec_hash},
        "ownerReferences": [owner_reference(model)],
    }


def content_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def model_mount(
    model: LLMModel, claim_name: str | None, store: ModelStore | None = None, run_dir: str | None = None
) -> tuple[list[dict], list[dict]]:
    """The model volume (read-only) and its mount, when the source is a claim or a TrainingJob's checkpoint claim
    (for a TrainingJob the directory its run saved checkpoints in, `run_dir`, unless source.path names another);
    with the model in S3, an emptyDir the server downloads the checkpoint into."""
    if store is not None:
        return [{"name": MODEL_VOLUME, "emptyDir": {}}], [{"name": MODEL_VOLUME, "mountPath": k.MODEL_MOUNT_PATH}]
    if claim_name is None:
        return [], []
    volume = {"name": MODEL_VOLUME, "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}}
    mount: dict[str, Any] = {"name": MODEL_VOLUME, "mountPath": k.MODEL_MOUNT_PATH, "readOnly": True}
    path = (model.spec.source.path if model.spec.source else None) or run_dir
    if path:
        mount["subPath"] = path
    return [volume], [mount]


def gpu_placement(model: LLMModel, config: ServingConfig) -> tuple[dict[str, str], list[dict], dict[str, str]]:
    """Node labels, tolerations and the GPU limit a replica gets from gpuType (documented operator settings)."""
    spec = model.spec
    selector = dict(spec.node_selector)
    tolerations = [dict(t) for t in spec.tolerations]
    if spec.gpu_type is None:
        return selector, tolerations, {}
    selector.update(config.gpu_types.get(spec.gpu_type, {}))
    tolerations.extend(dict(t) for t in config.gpu_tolerations if dict(t) not in tolerations)
    return selector, tolerations, {k.GPU_RESOURCE: str(spec.gpus_per_replica)}


def store_env(store: ModelStore) -> list[dict[str, str]]:
    """Where trainingjob.sdk's latest_checkpoint() finds the model in S3 and downloads it to (the model volume)."""
    return [
        {"name": "CHECKPOINT_URI", "value": store.uri},
        {"name": "CHECKPOINT_DIR", "value": k.MODEL_MOUNT_PATH},
    ]


def container(
    model: LLMModel,
    config: ServingConfig,
    claim_name: str | None,
    gpus: dict[str, str],
    store: ModelStore | None = None,
    run_dir: str | None = None,
) -> dict:
    spec = model.spec
    env = [
        {"name": ENV_MODEL_NAME, "value": spec.model_name},
        {"name": ENV_PORT, "value": str(spec.port)},
    ]
    if claim_name is not None or store is not None:
        env.append({"name": ENV_MODEL_DIR, "value": k.MODEL_MOUNT_PATH})
    if store is not None:
        env.extend(store_env(store))
    env.extend({"name": name, "value": value} for name, value in spec.env)
    resources = {key: dict(value) for key, value in spec.resources.items() if isinstance(value, Mapping)}
    if gpus:
        resources["limits"] = {**resources.get("limits", {}), **gpus}
    _, mounts = model_mount(model, claim_name, store, run_dir)
    result: dict[str, Any] = {
        "name": "server",
        "image": spec.image or config.image,
        "ports": [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}],
        "env": env,
        "resources": resources,
        "readinessProbe": {
            "httpGet": {"path": HEALTH_PATH, "port": "http"},
            "periodSeconds": 2,
            "failureThreshold": 3,
        },
        # PodSecurity `restricted` passes; the image decides the (non-root) user.
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if spec.command:
        result["command"] = list(spec.command)
    if spec.args:
        result["args"] = list(spec.args)
    if mounts:
        result["volumeMounts"] = mounts
    if store is not None and store.secret_name:
        result["envFrom"] = [{"secretRef": {"name": store.secret_name}}]
    return result


def deployment(
    model: LLMModel,
    config: ServingConfig,
    claim_name: str | None,
    store: ModelStore | None = None,
    run_dir: str | None = None,
) -> dict[str, Any]:
    """The Deployment of model servers; `claim_name` is the volume holding the model (`run_dir` the source
    TrainingJob's checkpoint directory in it), `store` the checkpoints in S3 it is downloaded from (neither: the
    image has it)."""
    node_selector, tolerations, gpus = gpu_placement(model, config)
    volumes, _ = model_mount(model, claim_name, store)
    pod_spec: dict[str, Any] = {
        "containers": [container(model, config, claim_name, gpus, store, run_dir)],
        "enableServiceLinks": False,
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if volumes:
        pod_spec["volumes"] = volumes
    spec = {
        "replicas": model.spec.replicas,
        "selector": {"matchLabels": selector_labels(model)},
        "template": {"metadata": {"labels": selector_labels(model)}, "spec": pod_spec},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(model, content_hash(spec)),
        "spec": spec,
    }


def service(model: LLMModel) -> dict[str, Any]:
    """A ClusterIP Service on port 80 in front of the ready servers."""
    spec = {
        "type": "ClusterIP",
        "selector": selector_labels(model),
        "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}],
    }
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(model, content_hash(spec)), "spec": spec}


def autoscaler(model: LLMModel) -> dict[str, Any] | None:
    """An autoscaling/v2 HorizontalPodAutoscaler that scales the LLMModel itself (its scale subresource)."""
    scaling = model.spec.autoscaling
    if scaling is None:
        return None
    spec = {
        "scaleTargetRef": {"apiVersion": k.MODEL_API_VERSION, "kind": k.MODEL_KIND, "name": model.name},
        "minReplicas": scaling.min_replicas,
        "maxReplicas": scaling.max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": scaling.target_cpu_percent},
                },
            }
        ],
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(model, content_hash(spec)),
        "spec": spec,
    }


def service_url(model: LLMModel) -> str:
    return f"http://{model.name}.{model.namespace}.svc/v1/models/{model.spec.model_name}:predict"
