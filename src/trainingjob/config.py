"""Operator-wide settings that differ per cluster (not per job), with defaults for the local cluster.

Each field that `tj operator` sets carries its option (trainingjob/options.py): its default is written here once,
and the CLI, the Deployment and the Helm chart are built from or checked against it."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from trainingjob import options as o
from trainingjob.api import constants as k
from trainingjob.api import webhook_config as w
from trainingjob.api.constants import GPU_RESOURCE
from trainingjob.options import setting


def _default_gpu_tolerations() -> list[dict[str, Any]]:
    # GPU node pools are commonly tainted with the resource name; tolerating it is harmless where they are not.
    return [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]


@dataclass(frozen=True)
class ServingConfig:
    """Operator-wide serving settings."""

    image: str = setting(
        k.DEFAULT_SERVING_IMAGE,
        flags="--serving-image",
        help="Image of an LLMModel's server when its spec.image is unset.",
    )
    # gpuType -> node labels that select nodes with that GPU, e.g. H100 -> {nvidia.com/gpu.product: NVIDIA-H100...}.
    gpu_types: Mapping[str, Mapping[str, str]] = setting(
        factory=dict,
        flags="--gpu-type",
        multiple=True,
        metavar="TYPE=KEY=VALUE",
        read=o.gpu_types,
        show_default=False,
        help="Node label an LLMModel with spec.gpuType TYPE requires (repeatable; a type without one only requests "
        "GPUs).",
    )
    # The operator's GPU tolerations (OperatorConfig.gpu_tolerations), for model servers too.
    gpu_tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class OperatorConfig:
    """What `tj operator` is told about the cluster it runs in."""

    # None by default: the nvidia.com/gpu request alone places a worker where the device plugin advertises GPUs.
    gpu_node_selector: dict[str, str] = setting(
        factory=dict,
        flags="--gpu-node-selector",
        multiple=True,
        metavar="KEY=VALUE",
        read=o.key_values,
        show_default=False,
        help="Node selector added to GPU workers (repeatable; default none: the nvidia.com/gpu request finds GPU "
        "nodes).",
    )
    gpu_tolerations: list[dict[str, Any]] = setting(
        factory=_default_gpu_tolerations,
        flags="--gpu-toleration",
        multiple=True,
        metavar="KEY[=VALUE]:EFFECT",
        read=o.tolerations,
        show_default=False,
        help="Toleration added to GPU workers (repeatable; replaces the default nvidia.com/gpu:NoSchedule; "
        "`none` adds no toleration).",
    )
    max_concurrent_reconciles: int = setting(16, flags="--max-concurrent-reconciles", kind=int, bounds=(1, 512))
    max_concurrent_creates: int = setting(32, flags="--max-concurrent-creates", kind=int, bounds=(1, 1024))
    # Leader election: only the holder of this Lease reconciles; None runs without (a single replica). Set from
    # --leader-elect and --leader-election-namespace (ProcessOptions).
    lease_namespace: str | None = w.SERVICE_NAMESPACE
    lease_name: str = setting("trainingjob-operator", flags="--leader-election-id", help="Name of the Lease.")
    # This replica's identity in the Lease ("": hostname, pid and a random suffix, unique per process). In a
    # cluster the pod's name: a container restarted in the same pod re-takes the Lease it still holds at once.
    lease_identity: str = setting(
        "",
        flags="--leader-election-identity",
        envvar="POD_NAME",
        show_default=False,
        help="This replica's holder identity in the Lease (default: $POD_NAME, else hostname, pid and a random "
        "suffix). Stable across container restarts, so a restarted leader re-takes its Lease at once.",
    )
    # /healthz fails once one reconcile has run this long (every API call times out well before).
    stuck_reconcile_seconds: int = setting(
        300,
        flags="--reconcile-stuck-after",
        kind=int,
        bounds=(5, 86400),
        metavar="SECONDS",
        help="/healthz on the metrics port fails once one reconcile has run this long, or a watch has heard nothing "
        "for as long (the liveness probe then restarts a wedged operator). At least 5: watches end and resume "
        "within half of it, and below that a quiet, healthy operator's probe could flap.",
    )
    # Every cached job is planned again this often even without an event (0: never).
    resync_seconds: int = setting(
        600,
        flags="--resync-period",
        kind=int,
        bounds=(0, 86400),
        metavar="SECONDS",
        help="Plan every job again this often even without an event (0: never).",
    )
    # Progress endpoint as workers reach it, and the CA that signs it (None: workers get no progress settings).
    progress_url: str | None = setting(
        None,
        flags="--progress-url",
        help="URL workers use to reach the progress endpoint "
        "(default https://trainingjob-operator.<namespace>.svc:<port>).",
    )
    progress_ca_pem: str | None = None
    # The key admission stamps are signed with (reconcile/admission.py), set once the webhooks run; None (no
    # webhooks, --webhook-port 0): nothing can be stamped, so jobs are not held for want of a stamp.
    admission_key: bytes | None = None
    # When this cluster's operators began stamping (the key's `admission.since`): only a job created before it may
    # be admitted without a stamp for having been reconciled at its generation (reconcile/admission.py).
    admission_since: datetime.datetime | None = None
    progress_reporters: tuple[int, ...] = setting(
        (0,),
        flags="--progress-reporters",
        metavar="I[,J…]",
        read=o.reporters,
        text=o.reporters_text,
        help="Worker indexes whose progress reports are accepted.",
    )
    # How long a worker may stay Terminating past its grace period, or the checkpoint PVC Pending, before the job
    # reports it (condition Blocked, a Warning Event).
    stuck_after_seconds: int = setting(
        60,
        flags="--stuck-after",
        kind=int,
        bounds=(1, 86400),
        metavar="SECONDS",
        help="Report a worker Terminating this long past its grace period, or a checkpoint PVC Pending this long "
        "(condition Blocked, a Warning Event).",
    )
    # A worker Terminating this long past its grace period on a NotReady, unreachable or deleted node is
    # force-deleted so it can be recreated (None or 0: never).
    force_delete_after_seconds: int | None = setting(
        300,
        flags="--force-delete-after",
        kind=int,
        bounds=(0, 86400),
        metavar="SECONDS",
        read=o.zero_is_none,
        help="Force-delete a worker Terminating this long past its grace period on a NotReady, unreachable or "
        "deleted node, so it can be recreated (0: never; a pod on a Ready node is never forced).",
    )
    # LLMModel: the default server image and what each gpuType selects (docs/serving.md).
    serving: ServingConfig = field(default_factory=ServingConfig)
    # MLflow tracking server of jobs without spec.tracking.mlflowTrackingUri (None: such jobs are not tracked).
    mlflow_tracking_uri: str | None = setting(
        None,
        flags="--mlflow-tracking-uri",
        envvar="TJ_MLFLOW_TRACKING_URI",
        metavar="URL",
        read=o.empty_is_none,
        show_default=False,
        help="MLflow tracking server of jobs that name none in spec.tracking (env TJ_MLFLOW_TRACKING_URI; default: "
        "such jobs are not tracked).",
    )
    # GPU telemetry: the DCGM exporters' Service ("namespace/name"; "" turns telemetry off) and how often they
    # are scraped (operator/gpu_telemetry.py); a job whose GPUs all stay below the threshold (%) is idle, and
    # fails after idle_gpu_seconds of it (None: never, the default).
    gpu_metrics_service: str = setting(
        "gpu-operator/nvidia-dcgm-exporter",
        flags="--gpu-metrics-service",
        metavar="NAMESPACE/NAME",
        help="Service of the DCGM exporters scraped for GPU utilization (status.resources, "
        "trainingjob_gpu_utilization_percent); empty turns GPU telemetry off.",
    )
    gpu_metrics_interval_seconds: float = setting(
        30.0,
        flags="--gpu-metrics-interval",
        kind=float,
        bounds=(1, 3600),
        metavar="SECONDS",
        help="How often the DCGM exporters are scraped.",
    )
    idle_gpu_threshold: float = setting(
        5.0,
        flags="--idle-gpu-threshold",
        kind=float,
        bounds=(0, 100),
        metavar="PERCENT",
        help="GPU utilization below which a job's GPUs count as idle (status.resources.gpuIdleSince).",
    )
    idle_gpu_seconds: int | None = setting(
        None,
        flags="--idle-gpu-timeout",
        kind=int,
        bounds=(0, 30 * 86400),
        metavar="SECONDS",
        read=o.zero_is_none,
        text=lambda seconds: seconds or 0,
        help="Fail a job (reason GPUsIdle) whose GPUs all stay below --idle-gpu-threshold this long; 0: never.",
    )


# The webhooks' TLS lifetimes (webhooks/tls.py Rotation takes its defaults from here).
CA_VALIDITY = datetime.timedelta(days=5 * 365)
CERT_VALIDITY = datetime.timedelta(days=90)


@dataclass(frozen=True)
class WebhookOptions:
    """What `tj operator` is told about its webhooks (webhooks/component.py WebhookSettings is made from it)."""

    port: int = setting(
        w.WEBHOOK_PORT,
        flags="--webhook-port",
        kind=int,
        bounds=(0, 65535),
        help="Serve the conversion and admission webhooks over HTTPS on this port (0: off; then v1alpha1 cannot be "
        "read or written, as v1 is stored).",
    )
    bind: str | None = setting(
        None,
        flags="--webhook-bind",
        help="Address the webhook server binds (default: 0.0.0.0 in a cluster, 127.0.0.1 outside).",
    )
    url: str | None = setting(
        None,
        flags="--webhook-url",
        metavar="URL",
        read=o.https_url,
        help="Base URL the API server calls the webhooks at, outside a cluster (default https://127.0.0.1:<port>); "
        "in a cluster it is the operator's Service.",
    )
    default_image: str | None = setting(
        k.DEFAULT_IMAGE_PATTERN,
        flags="--default-image",
        metavar="PATTERN",
        read=o.empty_is_none,
        help="Image of a v1 job without spec.image: {model} and {framework} are replaced from its spec ('' to "
        "derive none).",
    )
    cert_validity: datetime.timedelta = setting(
        CERT_VALIDITY,
        flags="--webhook-cert-validity",
        metavar="DURATION",
        read=o.duration,
        text=o.duration_text,
        help="Lifetime of the webhook server's certificate; renewed when a third is left.",
    )
    ca_validity: datetime.timedelta = setting(
        CA_VALIDITY,
        flags="--webhook-ca-validity",
        metavar="DURATION",
        read=o.duration,
        text=o.duration_text,
        help="Lifetime of the webhooks' CA; a successor is introduced when a third is left.",
    )

    client_ca: str | None = setting(
        None,
        flags="--webhook-client-ca",
        metavar="FILE",
        read=o.existing_file,
        help="Answer /mutate and /validate only for clients with a certificate signed by this CA: the API server, "
        "given one by its AdmissionConfiguration (docs/trainingjob.md, Who may call the webhooks).",
    )
    client_names: tuple[str, ...] = setting(
        (),
        flags="--webhook-client-name",
        multiple=True,
        metavar="NAME",
        read=tuple,
        help="Common name of the API server's client certificate (repeatable; default: any the CA signed).",
    )

    def __post_init__(self) -> None:
        if self.cert_validity > self.ca_validity:
            raise ValueError("the certificate cannot outlive its CA")


@dataclass(frozen=True)
class OperatorSettings:
    """Everything `tj operator` is told: how the process runs (what it watches, its logs, its servers, leader
    election), what it is told about the cluster (`config`) and about its webhooks (`webhooks`). Every field with
    an option is one of its flags (cli/operator.py builds them from here)."""

    config: OperatorConfig = field(default_factory=OperatorConfig)
    webhooks: WebhookOptions = field(default_factory=WebhookOptions)
    namespaces: tuple[str, ...] = setting(
        (), flags=("--namespace", "-n"), multiple=True, read=tuple, help="Watch this namespace (repeatable)."
    )
    all_namespaces: bool = setting(
        False, flags=("--all-namespaces", "-A"), is_flag=True, help="Watch every namespace (the default without -n)."
    )
    log_format: str = setting("text", flags="--log-format", choices=("text", "json"))
    log_level: str = setting("INFO", flags="--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    leader_elect: bool = setting(
        True,
        flags="--leader-elect/--no-leader-elect",
        kind=bool,
        help="Reconcile only while holding the Lease, so 2+ replicas are safe.",
    )
    # The operator's own namespace: its Lease, its Service (the progress endpoint's certificate), its webhooks'
    # TLS Secret.
    operator_namespace: str = setting(
        w.SERVICE_NAMESPACE,
        flags="--leader-election-namespace",
        envvar="POD_NAMESPACE",
        help="The operator's own namespace: its Lease, its Service and its webhooks' Secret (env POD_NAMESPACE).",
    )
    progress_port: int = setting(
        0,
        flags="--progress-port",
        kind=int,
        bounds=(0, 65535),
        help="Serve the HTTPS progress endpoint on this port (0: off).",
    )
    progress_bind: str = setting("0.0.0.0", flags="--progress-bind", help="Address the progress endpoint binds.")
    metrics_port: int = setting(
        0,
        flags="--metrics-port",
        kind=int,
        bounds=(0, 65535),
        help="Serve /metrics, /healthz and /readyz over HTTP on this port (0: off).",
    )
    metrics_bind: str = setting("0.0.0.0", flags="--metrics-bind", help="Address the metrics port binds.")
    liveness_endpoint: str | None = setting(
        None,
        flags="--liveness",
        metavar="URL",
        help="Serve a probe that answers 200 while the event loop runs, e.g. http://0.0.0.0:8080/healthz.",
    )

    def __post_init__(self) -> None:
        if self.all_namespaces and self.namespaces:
            raise ValueError("use either --namespace or --all-namespaces")

    def resolved(self) -> OperatorSettings:
        """The settings with what follows from the others: the Lease in the operator's namespace (none without
        leader election), the URL workers reach the progress endpoint at (none without the endpoint), and model
        servers tolerating what GPU workers tolerate."""
        config = self.config
        progress_url = None
        if self.progress_port:
            service = f"https://{w.SERVICE_NAME}.{self.operator_namespace}.svc:{self.progress_port}"
            progress_url = config.progress_url or service
        return replace(
            self,
            config=replace(
                config,
                lease_namespace=self.operator_namespace if self.leader_elect else None,
                progress_url=progress_url,
                serving=replace(config.serving, gpu_tolerations=tuple(config.gpu_tolerations)),
            ),
        )
