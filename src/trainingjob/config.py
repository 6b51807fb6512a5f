"""Operator-wide settings that differ per cluster (not per job), with defaults for the local cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.constants import GPU_RESOURCE


def _default_gpu_tolerations() -> list[dict[str, Any]]:
    # GPU node pools are commonly tainted with the resource name; tolerating it is harmless where they are not.
    return [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]


@dataclass(frozen=True)
class ServingConfig:
    """Operator-wide serving settings (`tj operator --serving-image`, `--gpu-type`)."""

    image: str = k.DEFAULT_SERVING_IMAGE
    # gpuType -> node labels that select nodes with that GPU, e.g. H100 -> {nvidia.com/gpu.product: NVIDIA-H100...}.
    gpu_types: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    gpu_tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class OperatorConfig:
    """What `tj operator` is told about the cluster it runs in."""

    # None by default: the nvidia.com/gpu request alone places a worker where the device plugin advertises GPUs.
    gpu_node_selector: dict[str, str] = field(default_factory=dict)
    gpu_tolerations: list[dict[str, Any]] = field(default_factory=_default_gpu_tolerations)
    max_concurrent_reconciles: int = 16
    max_concurrent_creates: int = 32
    # Leader election: only the holder of this Lease reconciles; None runs without (a single replica).
    lease_namespace: str | None = "trainingjob-system"
    lease_name: str = "trainingjob-operator"
    # This replica's identity in the Lease ("": hostname, pid and a random suffix, unique per process). In a
    # cluster the pod's name: a container restarted in the same pod re-takes the Lease it still holds at once.
    lease_identity: str = ""
    # /healthz fails once one reconcile has run this long (every API call times out well before).
    stuck_reconcile_seconds: int = 300
    # Every cached job is planned again this often even without an event (0: never).
    resync_seconds: int = 600
    # Progress endpoint as workers reach it, and the CA that signs it (None: workers get no progress settings).
    progress_url: str | None = None
    progress_ca_pem: str | None = None
    progress_reporters: tuple[int, ...] = (0,)
    # How long a worker may stay Terminating past its grace period, or the checkpoint PVC Pending, before the job
    # reports it (condition Blocked, a Warning Event).
    stuck_after_seconds: int = 60
    # A worker Terminating this long past its grace period on a NotReady, unreachable or deleted node is
    # force-deleted so it can be recreated (None or 0: never).
    force_delete_after_seconds: int | None = 300
    # LLMModel: the default server image and what each gpuType selects (docs/serving.md).
    serving: ServingConfig = field(default_factory=ServingConfig)
    # MLflow tracking server of jobs without spec.tracking.mlflowTrackingUri (None: such jobs are not tracked).
    mlflow_tracking_uri: str | None = None
    # GPU telemetry: the DCGM exporters' Service ("namespace/name"; "" turns telemetry off) and how often they
    # are scraped (operator/gpu_telemetry.py); a job whose GPUs all stay below the threshold (%) is idle, and
    # fails after idle_gpu_seconds of it (None: never, the default).
    gpu_metrics_service: str = "gpu-operator/nvidia-dcgm-exporter"
    gpu_metrics_interval_seconds: float = 30.0
    idle_gpu_threshold: float = 5.0
    idle_gpu_seconds: int | None = None
