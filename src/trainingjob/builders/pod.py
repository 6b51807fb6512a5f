"""The worker pod: one container `trainer`, the job's env contract, GPUs, volumes and security defaults.

This is the single place where scheduling metadata is added to a worker (labels, annotations, node selection,
scheduler name), so queueing and gang-scheduling integrations have one function to extend.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import config_map_name, pod_name, service_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata, spec_hash
from trainingjob.builders.env import worker_context, worker_env
from trainingjob.builders.pvc import checkpoint_claim_name
from trainingjob.config import OperatorConfig
from trainingjob.frameworks.base import PodChanges
from trainingjob.frameworks.registry import framework_for

# What PodSecurity `restricted` asks of a container that stock images (which often run as root) also tolerate.
BASE_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
BASE_POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}}
# The one field of `restricted` a root image cannot meet: the kubelet refuses to start its container
# (CreateContainerConfigError), so it is set only where the namespace enforces `restricted`.
NON_ROOT = {"runAsNonRoot": True}
RESTRICTED_CONTAINER_SECURITY = {**BASE_CONTAINER_SECURITY, **NON_ROOT}
RESTRICTED_POD_SECURITY = {**BASE_POD_SECURITY, **NON_ROOT}


@dataclass(frozen=True)
class Membership:
    """What a worker carries so its scheduler treats it as a member of gang `gang`: labels, annotations and pod spec
    fields (each gang provider in scheduling/gang.py fills its own)."""

    gang: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)


NO_CHANGES = PodChanges()


def default_security(restricted: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod, container) securityContext when spec.securityContext is unset: PodSecurity `restricted` in a namespace
    that enforces it; elsewhere all of it except runAsNonRoot, so images that run as root start."""
    if restricted:
        return copy.deepcopy(RESTRICTED_POD_SECURITY), copy.deepcopy(RESTRICTED_CONTAINER_SECURITY)
    return copy.deepcopy(BASE_POD_SECURITY), copy.deepcopy(BASE_CONTAINER_SECURITY)


def worker_labels(job: TrainingJob, index: int, attempt: int, fingerprint: str, role: str = k.WORKER) -> dict[str, str]:
    return {
        **job.spec.pod_labels,
        k.LABEL_ROLE: role,
        k.LABEL_WORKER_INDEX: str(index),
        k.LABEL_ATTEMPT: str(attempt),
        k.LABEL_SPEC_HASH: fingerprint,
        k.LABEL_LAB_WORKER: job.name,
    }


def worker_resources(job: TrainingJob, role: str = k.WORKER) -> dict[str, dict[str, Any]]:
    """The user's requests/limits (a role's own, else the workers') plus `nvidia.com/gpu` in both (extended
    resources need limits == requests)."""
    role_spec = job.spec.roles.get(role)
    declared = role_spec.resources if role_spec is not None and role_spec.resources is not None else None
    resources = job.spec.resources if declared is None else declared
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    gpus = job.spec.gpus_of(role)
    if gpus > 0:
        requests[k.GPU_RESOURCE] = limits[k.GPU_RESOURCE] = str(gpus)
    return {key: value for key, value in (("requests", requests), ("limits", limits)) if value}


def progress_token_volume(config: OperatorConfig) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A pod-bound ServiceAccount token for the progress endpoint's audience, rotated by the kubelet."""
    if not config.progress_url:
        return None
    source = {"serviceAccountToken": {"audience": k.PROGRESS_AUDIENCE, "expirationSeconds": 3600, "path": "token"}}
    volume = {"name": "tj-progress-token", "projected": {"sources": [source]}}
    return volume, {"name": "tj-progress-token", "mountPath": k.PROGRESS_TOKEN_DIR, "readOnly": True}


def worker_volumes(
    job: TrainingJob, config: OperatorConfig | None = None, changes: PodChanges = NO_CHANGES
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts): shared memory for dataloaders/NCCL, the job's ConfigMap, data, checkpoints, what the
    framework adds (`changes`), the user's."""
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "tj-config", "configMap": {"name": config_map_name(job.name)}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": k.SHM_MOUNT_PATH},
        {"name": "tj-config", "mountPath": k.CONFIG_MOUNT_PATH, "readOnly": True},
    ]
    data = job.spec.data_volume
    if data is not None:
        volumes.append(
            {"name": "data", "persistentVolumeClaim": {"claimName": data.claim_name, "readOnly": data.read_only}}
        )
        mounts.append({"name": "data", "mountPath": data.mount_path, "readOnly": data.read_only})
    token = progress_token_volume(config) if config is not None else None
    if token is not None:
        volumes.append(token[0])
        mounts.append(token[1])
    claim = checkpoint_claim_name(job)
    if claim is not None:
        volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": "checkpoints", "mountPath": job.spec.checkpoint_path})
    elif uses_object_store(job):
        # Scratch space where a checkpoint is written before it goes to the store and where the newest is fetched
        # to: writable in any image (a non-root user cannot create /checkpoints itself), gone with the pod.
        volumes.append({"name": "checkpoints", "emptyDir": {}})
        mounts.append({"name": "checkpoints", "mountPath": job.spec.checkpoint_path})
    volumes += [dict(volume) for volume in changes.volumes]
    mounts += [dict(mount) for mount in changes.mounts]
    return volumes + job.spec.volumes, mounts + job.spec.volume_mounts


def uses_object_store(job: TrainingJob) -> bool:
    storage = job.spec.checkpoint.storage
    return job.spec.checkpoint.enabled and storage is not None and not storage.is_volume


def container_command(job: TrainingJob, role: str, changes: PodChanges = NO_CHANGES) -> tuple[list[str], list[str]]:
    """(command, args) of a pod of `role`: the framework's when it replaces it (`changes`), else the role's own,
    else the workers'."""
    spec = job.spec
    if changes.command is not None:
        return list(changes.command), list(changes.args)
    role_spec = spec.roles.get(role)
    if role_spec is None or (role_spec.command is None and role_spec.args is None):
        return list(spec.command), list(spec.args)
    command = spec.command if role_spec.command is None else role_spec.command
    return list(command), list(role_spec.args or [])


@dataclass(frozen=True)
class QueuePlacement:
    """What a queue's admission adds to the pods of one role: Kueue's admitted ResourceFlavors' node labels (to the
    nodeSelector) and tolerations, as its own job integrations add them (queueing/admission.py reads them)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def applied_to(self, placement: dict[str, Any]) -> dict[str, Any]:
        """`placement` (worker_placement's answer) with this admission's selector and tolerations added."""
        result = dict(placement)
        if self.node_selector:
            result["nodeSelector"] = {**placement.get("nodeSelector", {}), **self.node_selector}
        extra = [dict(t) for t in self.tolerations if t not in placement.get("tolerations", [])]
        if extra:
            result["tolerations"] = [*placement.get("tolerations", []), *extra]
        return result


def worker_placement(job: TrainingJob, config: OperatorConfig, role: str = k.WORKER) -> dict[str, Any]:
    """Node selection: cluster GPU defaults when the pod requests GPUs, the job's own settings on top."""
    scheduling = job.spec.scheduling
    wants_gpus = job.spec.gpus_of(role) > 0
    node_selector = {**(config.gpu_node_selector if wants_gpus else {}), **scheduling.node_selector}
    tolerations = (config.gpu_tolerations if wants_gpus else []) + scheduling.tolerations
    placement: dict[str, Any] = {}
    optional = {
        "nodeSelector": node_selector,
        "tolerations": tolerations,
        "affinity": scheduling.affinity,
        "priorityClassName": scheduling.priority_class_name,
        "schedulerName": scheduling.scheduler_name,
        "serviceAccountName": job.spec.service_account_name,
        "imagePullSecrets": job.spec.image_pull_secrets,
    }
    for key, value in optional.items():
        if value:
            placement[key] = value
    return placement


def desired_worker_pod(
    job: TrainingJob,
    index: int,
    attempt: int,
    config: OperatorConfig,
    spec_label: str | None = None,
    restricted: bool = True,
    role: str = k.WORKER,
    gang: Membership | None = None,
    queue: QueuePlacement | None = None,
) -> dict[str, Any]:
    """Pod `index` of `role` (a worker unless told) of `attempt`. `spec_label` marks the spec it is built from
    (default: its fingerprint, see reconcile/spec_version.py); `restricted`: the namespace enforces PodSecurity
    `restricted` (default_security); `gang`: the gang it joins (scheduling/gang.py), marked by the ml.example.com/gang
    label besides what its scheduler reads (a label, an annotation or spec.workloadRef; the job's own schedulerName
    wins); `queue`: what Kueue's admission adds to its placement."""
    spec = job.spec
    changes = framework_for(spec.framework).pod_changes(worker_context(job, index, role))
    volumes, mounts = worker_volumes(job, config, changes)
    labels = worker_labels(job, index, attempt, spec_label or spec_hash(job), role)
    if gang is not None:
        labels.update({**gang.labels, k.LABEL_GANG: gang.gang})
    name = pod_name(job.name, role, index)
    metadata = child_metadata(job, name, labels)
    metadata["annotations"] = {**spec.pod_annotations, **(gang.annotations if gang is not None else {})}
    pod_security, container_security = default_security(restricted)
    command, args = container_command(job, role, changes)
    container: dict[str, Any] = {
        "name": k.TRAINER_CONTAINER,
        "image": spec.image,
        "command": command,
        "env": worker_env(job, index, attempt, config, role),
        "ports": [{"name": "dist", "containerPort": spec.master_port, "protocol": "TCP"}],
        "volumeMounts": mounts,
        "securityContext": container_security
        if spec.security_context is None
        else copy.deepcopy(spec.security_context),
    }
    if args:
        container["args"] = args
    if changes.termination_message_policy is not None:
        container["terminationMessagePolicy"] = changes.termination_message_policy
    storage = spec.checkpoint.storage
    if uses_object_store(job) and storage is not None and storage.secret_name:
        container["envFrom"] = [{"secretRef": {"name": storage.secret_name}}]  # before env: ours win
    resources = worker_resources(job, role)
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            # Restarts are the operator's decision (gang semantics, backoff, exit codes), never the kubelet's.
            "restartPolicy": "Never",
            "hostname": name,
            "subdomain": service_name(job.name),
            # Service links would add env vars for every Service in the namespace to thousands of pods.
            "enableServiceLinks": False,
            # Time to save a checkpoint on the way out (sdk.on_stop) when stopped: suspend, scale, preemption.
            "terminationGracePeriodSeconds": spec.termination_grace_period_seconds,
            **({"securityContext": pod_security} if spec.security_context is None else {}),
            "containers": [container],
            "volumes": volumes,
            **(dict(gang.spec) if gang is not None else {}),
            **(queue.applied_to if queue is not None else dict)(worker_placement(job, config, role)),
        },
    }


def framework_children(job: TrainingJob) -> list[dict[str, Any]]:
    """The children the job's framework adds with its workers (e.g. MPI's key Secret), made the job's: our labels
    and the controller ownerReference, so garbage collection takes them with the job."""
    children = framework_for(job.spec.framework).children(worker_context(job, 0))
    return [{**child, "metadata": child_metadata(job, child["metadata"]["name"])} for child in children]
