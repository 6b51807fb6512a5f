"""A typed, read-only view of a TrainingJob body, with the schema's defaults applied again.

Why re-apply defaults: the API server defaults every field on write, but the operator must never crash on an
object written before a default existed (or by a test); reading through one typed view keeps `.get()` chains out
of builders and the planner. The status is typed too (api/status.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.conversion import to_internal
from trainingjob.api.status import JobStatus
from trainingjob.kube.meta import object_meta


@dataclass(frozen=True)
class DataVolume:
    claim_name: str
    read_only: bool = True
    mount_path: str = k.DEFAULT_DATA_MOUNT_PATH


@dataclass(frozen=True)
class GangSpec:
    """spec.scheduling.gang: which gang API places the workers all at once (see scheduling/gang.py)."""

    provider: str = "Auto"
    min_count: int | None = None
    queue: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GangSpec:
        data = data or {}
        min_count = data.get("minCount")
        return cls(data.get("provider", "Auto"), None if min_count is None else int(min_count), data.get("queue"))


@dataclass(frozen=True)
class Scheduling:
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    affinity: dict[str, Any] | None = None
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    gang: GangSpec = field(default_factory=GangSpec)


@dataclass(frozen=True)
class FailureRule:
    exit_codes: tuple[int, ...]
    action: str  # Restart | Fail | Ignore


@dataclass(frozen=True)
class FailurePolicy:
    restart_strategy: str = "Gang"
    rules: tuple[FailureRule, ...] = ()
    backoff_base_seconds: int = 10
    backoff_max_seconds: int = 300

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> FailurePolicy:
        data = data or {}
        backoff = data.get("backoff") or {}
        return cls(
            restart_strategy=data.get("restartStrategy", "Gang"),
            rules=tuple(
                FailureRule(tuple(r.get("exitCodes") or ()), r.get("action", "Restart"))
                for r in data.get("rules") or ()
            ),
            backoff_base_seconds=int(backoff.get("baseSeconds", 10)),
            backoff_max_seconds=int(backoff.get("maxSeconds", 300)),
        )


@dataclass(frozen=True)
class CheckpointStorage:
    claim_name: str | None = None
    size: str | None = None
    storage_class_name: str | None = None
    access_modes: tuple[str, ...] = ("ReadWriteMany",)
    type: str = "pvc"  # pvc: a volume the workers mount; s3 | gcs: an object store the training code writes to
    path: str | None = None  # s3:// or gs:// URI (object stores only)
    secret_name: str | None = None  # object stores: a Secret whose keys become the workers' environment

    @property
    def is_volume(self) -> bool:
        return self.type == "pvc"


@dataclass(frozen=True)
class Checkpoint:
    enabled: bool = False
    dir: str | None = None
    interval: int | None = None
    keep_last: int | None = None
    delete_on_completion: bool = False
    storage: CheckpointStorage | None = None
    resume_from: str | None = None  # an earlier run's checkpoint, relative to the storage's root

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Checkpoint:
        data = data or {}
        storage = data.get("storage")
        return cls(
            enabled=bool(data.get("enabled", False)),
            dir=data.get("dir"),
            interval=data.get("interval"),
            keep_last=data.get("keepLast"),
            delete_on_completion=bool(data.get("deleteOnCompletion", False)),
            resume_from=data.get("resumeFrom") or None,
            storage=CheckpointStorage(
                claim_name=storage.get("claimName"),
                size=None if storage.get("size") is None else str(storage["size"]),
                # storageClass: seed 002's name of the same field (the schema refuses two different values)
                storage_class_name=storage.get("storageClassName") or storage.get("storageClass") or None,
                access_modes=tuple(storage.get("accessModes") or ("ReadWriteMany",)),
                type=storage.get("type") or "pvc",
                path=storage.get("path"),
                secret_name=storage.get("secretName") or None,
            )
            if storage
            else None,
        )


@dataclass(frozen=True)
class RoleSpec:
    """spec.roles.<role>: how many pods of a role other than worker, and what they do differently from workers.

    None means "as the workers": command, args and resources fall back to spec's; env is added to spec.env."""

    replicas: int = 1
    gpus: int = 0
    resources: dict[str, dict[str, Any]] | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[dict[str, Any]] = field(default_factory=list)
    restart_policy: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoleSpec:
        resources = data.get("resources")
        return cls(
            replicas=int(data.get("replicas", 1)),
            gpus=int(data.get("gpus", 0)),
            resources=None if resources is None else {key: dict(value) for key, value in resources.items()},
            command=None if data.get("command") is None else list(data["command"]),
            args=None if data.get("args") is None else list(data["args"]),
            env=[dict(e) for e in data.get("env") or []],
            restart_policy=data.get("restartPolicy"),
        )


def _roles(data: Any) -> dict[str, RoleSpec]:
    """spec.roles by role name; anything the schema would not have let through is left out."""
    if not isinstance(data, Mapping):
        return {}
    return {
        role: RoleSpec.from_dict(value)
        for role, value in data.items()
        if role in k.ROLES and role != k.WORKER and isinstance(value, Mapping)
    }


@dataclass(frozen=True)
class Elastic:
    """spec.elastic: PyTorch elastic training (torchrun's c10d rendezvous) between minWorkers and maxWorkers."""

    min_workers: int
    max_workers: int
    max_restarts: int = 10

    @classmethod
    def from_dict(cls, data: Any, workers: int) -> Elastic | None:
        if not isinstance(data, Mapping):
            return None
        return cls(
            min_workers=int(data.get("minWorkers", 1)),
            max_workers=int(data.get("maxWorkers", workers)),
            max_restarts=int(data.get("maxRestarts", 10)),
        )


@dataclass(frozen=True)
class JobSpec:
    """spec of a TrainingJob; field names follow the CRD (snake_case here)."""

    framework: str
    image: str
    command: list[str]
    args: list[str] = field(default_factory=list)
    env: list[dict[str, Any]] = field(default_factory=list)
    workers: int = 1
    gpu_per_worker: int = 0
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_volume: DataVolume | None = None
    checkpoint_dir: str = k.DEFAULT_CHECKPOINT_DIR
    checkpoint_interval: int = 1
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    dataset: str | None = None
    restart_policy: str = "OnFailure"
    backoff_limit: int = 3
    master_port: int = k.DEFAULT_MASTER_PORT
    backend_override: str | None = None
    scheduling: Scheduling = field(default_factory=Scheduling)
    service_account_name: str | None = None
    image_pull_secrets: list[dict[str, str]] = field(default_factory=list)
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = field(default_factory=list)
    security_context: dict[str, Any] | None = None
    suspend: bool = False
    termination_grace_period_seconds: int = k.DEFAULT_GRACE_PERIOD_SECONDS
    active_deadline_seconds: int | None = None
    startup_timeout_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: str = "Running"
    success_policy: str = "AllWorkers"
    failure_policy: FailurePolicy = field(default_factory=FailurePolicy)
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    roles: dict[str, RoleSpec] = field(default_factory=dict)
    elastic: Elastic | None = None

    def replicas_of(self, role: str) -> int:
        """How many pods of `role` the job wants (0 for a role it does not have)."""
        if role == k.WORKER:
            return self.workers
        spec = self.roles.get(role)
        return spec.replicas if spec is not None else 0

    @property
    def has_roles(self) -> bool:
        """Whether the job has pods of a role other than worker (a multi-role topology)."""
        return any(spec.replicas > 0 for spec in self.roles.values())

    def gpus_of(self, role: str) -> int:
        if role == k.WORKER:
            return self.gpu_per_worker
        spec = self.roles.get(role)
        return spec.gpus if spec is not None else 0

    @property
    def checkpoint_path(self) -> str:
        """Where workers write checkpoints: checkpoint.dir, else checkpointDir."""
        return self.checkpoint.dir or self.checkpoint_dir

    @property
    def checkpoint_every(self) -> int:
        return self.checkpoint.interval or self.checkpoint_interval

    @property
    def backend(self) -> str:
        """NCCL needs GPUs; without them gloo is the only backend that works."""
        return self.backend_override or ("nccl" if self.gpu_per_worker > 0 else "gloo")

    @property
    def processes_per_worker(self) -> int:
        return max(self.gpu_per_worker, 1)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> JobSpec:
        networking = spec.get("networking") or {}
        data_volume = spec.get("dataVolume")
        scheduling = spec.get("scheduling") or {}
        return cls(
            framework=spec.get("framework", ""),
            image=spec.get("image", ""),
            command=list(spec.get("command") or []),
            args=list(spec.get("args") or []),
            env=[dict(e) for e in spec.get("env") or []],
            workers=int(spec.get("workers", 1)),
            gpu_per_worker=int(spec.get("gpuPerWorker", 0)),
            resources={key: dict(value) for key, value in (spec.get("resources") or {}).items()},
            data_volume=DataVolume(
                claim_name=data_volume.get("claimName", ""),
                read_only=data_volume.get("readOnly", True),
                mount_path=data_volume.get("mountPath", k.DEFAULT_DATA_MOUNT_PATH),
            )
            if data_volume
            else None,
            checkpoint_dir=spec.get("checkpointDir", k.DEFAULT_CHECKPOINT_DIR),
            checkpoint_interval=int(spec.get("checkpointInterval", 1)),
            hyperparameters=dict(spec.get("hyperparameters") or {}),
            model=spec.get("model"),
            dataset=spec.get("dataset"),
            restart_policy=spec.get("restartPolicy", "OnFailure"),
            backoff_limit=int(spec.get("backoffLimit", 3)),
            master_port=int(networking.get("masterPort", k.DEFAULT_MASTER_PORT)),
            backend_override=networking.get("backend"),
            scheduling=Scheduling(
                node_selector=dict(scheduling.get("nodeSelector") or {}),
                tolerations=[dict(t) for t in scheduling.get("tolerations") or []],
                affinity=scheduling.get("affinity"),
                priority_class_name=scheduling.get("priorityClassName"),
                scheduler_name=scheduling.get("schedulerName"),
                gang=GangSpec.from_dict(scheduling.get("gang")),
            ),
            service_account_name=spec.get("serviceAccountName"),
            image_pull_secrets=[dict(s) for s in spec.get("imagePullSecrets") or []],
            pod_labels=dict(spec.get("podLabels") or {}),
            pod_annotations=dict(spec.get("podAnnotations") or {}),
            volumes=[dict(v) for v in spec.get("volumes") or []],
            volume_mounts=[dict(m) for m in spec.get("volumeMounts") or []],
            security_context=spec.get("securityContext"),
            suspend=bool(spec.get("suspend", False)),
            termination_grace_period_seconds=int(
                spec.get("terminationGracePeriodSeconds", k.DEFAULT_GRACE_PERIOD_SECONDS)
            ),
            active_deadline_seconds=spec.get("activeDeadlineSeconds"),
            startup_timeout_seconds=spec.get("startupTimeoutSeconds"),
            ttl_seconds_after_finished=spec.get("ttlSecondsAfterFinished"),
            clean_pod_policy=spec.get("cleanPodPolicy", "Running"),
            success_policy=spec.get("successPolicy", "AllWorkers"),
            failure_policy=FailurePolicy.from_dict(spec.get("failurePolicy")),
            checkpoint=Checkpoint.from_dict(spec.get("checkpoint")),
            roles=_roles(spec.get("roles")),
            elastic=Elastic.from_dict(spec.get("elastic"), int(spec.get("workers", 1))),
        )


@dataclass(frozen=True)
class TrainingJob:
    """Identity, spec and last written status of one TrainingJob, both typed."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: JobSpec
    raw_spec: Mapping[str, Any]
    status: JobStatus
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: str | None = None
    creation_timestamp: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def deleting(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TrainingJob:
        """From a body of any served version: it is converted to the internal shape first (api/conversion.py)."""
        body = to_internal(body)
        meta = object_meta(body)
        spec = body.get("spec") or {}
        return cls(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            generation=meta.generation,
            spec=JobSpec.from_dict(spec),
            raw_spec=spec,
            status=JobStatus.from_dict(body.get("status") or {}),
            finalizers=meta.finalizers,
            deletion_timestamp=meta.deletion_timestamp,
            creation_timestamp=meta.creation_timestamp,
            annotations=meta.annotations,
        )
