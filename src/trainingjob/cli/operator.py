"""`tj operator`: run the TrainingJob controller against the cluster in KUBECONFIG (or in-cluster)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import click

from trainingjob.api.constants import DEFAULT_IMAGE_PATTERN, DEFAULT_SERVING_IMAGE
from trainingjob.api.webhook_config import WEBHOOK_PORT
from trainingjob.config import OperatorConfig, ServingConfig

if TYPE_CHECKING:
    from trainingjob.webhooks.component import WebhookSettings


def parse_key_values(values: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


def parse_gpu_types(values: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """TYPE=KEY=VALUE (repeatable, several labels per type allowed): an LLMModel's gpuType TYPE selects nodes with
    label KEY=VALUE, e.g. H100=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3."""
    types: dict[str, dict[str, str]] = {}
    for item in values:
        gpu_type, sep, label = item.partition("=")
        key, label_sep, value = label.partition("=")
        if not sep or not gpu_type or not label_sep or not key:
            raise click.BadParameter(f"{item!r} is not TYPE=KEY=VALUE")
        types.setdefault(gpu_type, {})[key] = value
    return types


TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_toleration(text: str) -> dict[str, str]:
    """KEY:EFFECT tolerates the taint whatever its value; KEY=VALUE:EFFECT only that value."""
    taint, sep, effect = text.rpartition(":")
    if not sep or effect not in TOLERATION_EFFECTS:
        raise click.BadParameter(
            f"{text!r} is not KEY[=VALUE]:EFFECT with EFFECT one of {', '.join(TOLERATION_EFFECTS)}"
        )
    key, has_value, value = taint.partition("=")
    if not key:
        raise click.BadParameter(f"{text!r} has no taint key")
    if has_value:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


def parse_tolerations(values: tuple[str, ...]) -> list[dict[str, str]] | None:
    """None keeps the defaults; `none` alone removes them; otherwise exactly the given tolerations."""
    if not values:
        return None
    if values == ("none",):
        return []
    return [parse_toleration(value) for value in values]


def parse_reporters(text: str) -> tuple[int, ...]:
    """Comma-separated worker indexes allowed to report progress, e.g. "0" or "0,1"."""
    try:
        indexes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as error:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of worker indexes") from error
    if not indexes or indexes[0] < 0:
        raise click.BadParameter(f"{text!r} must name at least one worker index, none negative")
    return indexes


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> datetime.timedelta:
    """90d, 12h, 30m or 45s (a bare number is seconds)."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError as error:
        raise click.BadParameter(f"{text!r} is not a duration such as 90d, 12h, 30m or 45s") from error
    if seconds <= 0:
        raise click.BadParameter(f"{text!r} must be positive")
    return datetime.timedelta(seconds=seconds)


def webhook_settings(
    port: int, bind: str | None, url: str | None, namespace: str, default_image: str, cert: str, ca: str
) -> WebhookSettings | None:
    from trainingjob.webhooks.component import WebhookSettings
    from trainingjob.webhooks.tls import Rotation

    if not port:
        return None
    if url is not None and not url.startswith("https://"):
        raise click.BadParameter(f"{url!r} must be an https:// URL", param_hint="--webhook-url")
    rotation = Rotation(ca_validity=parse_duration(ca), cert_validity=parse_duration(cert))
    if rotation.cert_validity > rotation.ca_validity:
        raise click.BadParameter("the certificate cannot outlive its CA", param_hint="--webhook-cert-validity")
    return WebhookSettings(
        port=port, bind=bind, url=url, namespace=namespace, default_image=default_image or None, rotation=rotation
    )


@click.command()
@click.option("--namespace", "-n", "namespaces", multiple=True, help="Watch this namespace (repeatable).")
@click.option("--all-namespaces", "-A", is_flag=True, help="Watch every namespace (the default without -n).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--gpu-node-selector",
    multiple=True,
    metavar="KEY=VALUE",
    help="Node selector added to GPU workers (repeatable; default none: the nvidia.com/gpu request finds GPU nodes).",
)
@click.option(
    "--gpu-toleration",
    multiple=True,
    metavar="KEY[=VALUE]:EFFECT",
    help="Toleration added to GPU workers (repeatable; replaces the default nvidia.com/gpu:NoSchedule; "
    "`none` adds no toleration).",
)
@click.option(
    "--gpu-type",
    "gpu_types",
    multiple=True,
    metavar="TYPE=KEY=VALUE",
    help="Node label an LLMModel with spec.gpuType TYPE requires (repeatable; a type without one only requests GPUs).",
)
@click.option(
    "--serving-image",
    default=DEFAULT_SERVING_IMAGE,
    show_default=True,
    help="Image of an LLMModel's server when its spec.image is unset.",
)
@click.option(
    "--mlflow-tracking-uri",
    envvar="TJ_MLFLOW_TRACKING_URI",
    default=None,
    metavar="URL",
    help="MLflow tracking server of jobs that name none in spec.tracking (env TJ_MLFLOW_TRACKING_URI; default: "
    "such jobs are not tracked).",
)
@click.option(
    "--gpu-metrics-service",
    default=OperatorConfig.gpu_metrics_service,
    show_default=True,
    metavar="NAMESPACE/NAME",
    help="Service of the DCGM exporters scraped for GPU utilization (status.resources, "
    "trainingjob_gpu_utilization_percent); empty turns GPU telemetry off.",
)
@click.option(
    "--gpu-metrics-interval",
    default=OperatorConfig.gpu_metrics_interval_seconds,
    show_default=True,
    type=click.FloatRange(1, 3600),
    metavar="SECONDS",
    help="How often the DCGM exporters are scraped.",
)
@click.option(
    "--idle-gpu-timeout",
    default=0,
    show_default=True,
    type=click.IntRange(0, 30 * 86400),
    metavar="SECONDS",
    help="Fail a job (reason GPUsIdle) whose GPUs all stay below --idle-gpu-threshold this long; 0: never.",
)
@click.option(
    "--idle-gpu-threshold",
    default=OperatorConfig.idle_gpu_threshold,
    show_default=True,
    type=click.FloatRange(0, 100),
    metavar="PERCENT",
    help="GPU utilization below which a job's GPUs count as idle (status.resources.gpuIdleSince).",
)
@click.option(
    "--progress-reporters",
    default="0",
    show_default=True,
    metavar="I[,J…]",
    help="Worker indexes whose progress reports are accepted.",
)
@click.option(
    "--stuck-after",
    default=60,
    show_default=True,
    type=click.IntRange(1, 86400),
    metavar="SECONDS",
    help="Report a worker Terminating this long past its grace period, or a checkpoint PVC Pending this long "
    "(condition Blocked, a Warning Event).",
)
@click.option(
    "--force-delete-after",
    default=300,
    show_default=True,
    type=click.IntRange(0, 86400),
    metavar="SECONDS",
    help="Force-delete a worker Terminating this long past its grace period on a NotReady, unreachable or deleted "
    "node, so it can be recreated (0: never; a pod on a Ready node is never forced).",
)
@click.option("--max-concurrent-reconciles", default=16, show_default=True, type=click.IntRange(1, 512))
@click.option("--max-concurrent-creates", default=32, show_default=True, type=click.IntRange(1, 1024))
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Reconcile only while holding the Lease, so 2+ replicas are safe.",
)
@click.option("--leader-election-namespace", envvar="POD_NAMESPACE", default="trainingjob-system", show_default=True)
@click.option("--leader-election-id", default="trainingjob-operator", show_default=True, help="Name of the Lease.")
@click.option(
    "--leader-election-identity",
    envvar="POD_NAME",
    default="",
    help="This replica's holder identity in the Lease (default: $POD_NAME, else hostname, pid and a random "
    "suffix). Stable across container restarts, so a restarted leader re-takes its Lease at once.",
)
@click.option(
    "--resync-period",
    default=600,
    show_default=True,
    type=click.IntRange(0, 86400),
    metavar="SECONDS",
    help="Plan every job again this often even without an event (0: never).",
)
@click.option(
    "--reconcile-stuck-after",
    default=300,
    show_default=True,
    type=click.IntRange(5, 86400),
    metavar="SECONDS",
    help="/healthz on the metrics port fails once one reconcile has run this long, or a watch has heard nothing "
    "for as long (the liveness probe then restarts a wedged operator). At least 5: watches end and resume within "
    "half of it, and below that a quiet, healthy operator's probe could flap.",
)
@click.option(
    "--progress-port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Serve the HTTPS progress endpoint on this port (0: off).",
)
@click.option(
    "--metrics-port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Serve /metrics, /healthz and /readyz over HTTP on this port (0: off).",
)
@click.option("--metrics-bind", default="0.0.0.0", show_default=True, help="Address the metrics port binds.")
@click.option("--progress-bind", default="0.0.0.0", show_default=True, help="Address the progress endpoint binds.")
@click.option(
    "--progress-url",
    default=None,
    help="URL workers use to reach the progress endpoint "
    "(default https://trainingjob-operator.<namespace>.svc:<port>).",
)
@click.option(
    "--webhook-port",
    default=WEBHOOK_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Serve the conversion and admission webhooks over HTTPS on this port (0: off; then v1alpha1 cannot be "
    "read or written, as v1 is stored).",
)
@click.option(
    "--webhook-bind",
    default=None,
    help="Address the webhook server binds (default: 0.0.0.0 in a cluster, 127.0.0.1 outside).",
)
@click.option(
    "--webhook-url",
    default=None,
    metavar="URL",
    help="Base URL the API server calls the webhooks at, outside a cluster (default https://127.0.0.1:<port>); "
    "in a cluster it is the operator's Service.",
)
@click.option(
    "--default-image",
    default=DEFAULT_IMAGE_PATTERN,
    show_default=True,
    metavar="PATTERN",
    help="Image of a v1 job without spec.image: {model} and {framework} are replaced from its spec ('' to "
    "derive none).",
)
@click.option(
    "--webhook-cert-validity",
    default="90d",
    show_default=True,
    metavar="DURATION",
    help="Lifetime of the webhook server's certificate; renewed when a third is left.",
)
@click.option(
    "--webhook-ca-validity",
    default="1825d",
    show_default=True,
    metavar="DURATION",
    help="Lifetime of the webhooks' CA; a successor is introduced when a third is left.",
)
@click.option(
    "--liveness",
    "liveness_endpoint",
    default=None,
    metavar="URL",
    help="Serve a probe that answers 200 while the event loop runs, e.g. http://0.0.0.0:8080/healthz.",
)
def operator(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    log_format: str,
    log_level: str,
    gpu_node_selector: tuple[str, ...],
    gpu_toleration: tuple[str, ...],
    gpu_types: tuple[str, ...],
    serving_image: str,
    mlflow_tracking_uri: str | None,
    gpu_metrics_service: str,
    gpu_metrics_interval: float,
    idle_gpu_timeout: int,
    idle_gpu_threshold: float,
    progress_reporters: str,
    stuck_after: int,
    force_delete_after: int,
    max_concurrent_reconciles: int,
    max_concurrent_creates: int,
    leader_elect: bool,
    leader_election_namespace: str,
    leader_election_id: str,
    leader_election_identity: str,
    reconcile_stuck_after: int,
    resync_period: int,
    progress_port: int,
    progress_bind: str,
    progress_url: str | None,
    metrics_port: int,
    metrics_bind: str,
    webhook_port: int,
    webhook_bind: str | None,
    webhook_url: str | None,
    default_image: str,
    webhook_cert_validity: str,
    webhook_ca_validity: str,
    liveness_endpoint: str | None,
) -> None:
    """Run the operator until interrupted."""
    from trainingjob.operator.lazy_client import install as load_client_classes_lazily

    load_client_classes_lazily()  # before anything imports kubernetes_asyncio: ~40 MiB less (operator/lazy_client.py)
    from trainingjob.operator.runner import run_operator

    if all_namespaces and namespaces:
        raise click.UsageError("use either --namespace or --all-namespaces")
    defaults = OperatorConfig()
    config = OperatorConfig(
        gpu_node_selector=parse_key_values(gpu_node_selector) or defaults.gpu_node_selector,
        gpu_tolerations=(
            tolerations if (tolerations := parse_tolerations(gpu_toleration)) is not None else defaults.gpu_tolerations
        ),
        progress_reporters=parse_reporters(progress_reporters),
        mlflow_tracking_uri=mlflow_tracking_uri or None,
        gpu_metrics_service=gpu_metrics_service,
        gpu_metrics_interval_seconds=gpu_metrics_interval,
        idle_gpu_seconds=idle_gpu_timeout or None,
        idle_gpu_threshold=idle_gpu_threshold,
        serving=ServingConfig(
            image=serving_image,
            gpu_types=parse_gpu_types(gpu_types),
            gpu_tolerations=tuple(
                tolerations
                if (tolerations := parse_tolerations(gpu_toleration)) is not None
                else defaults.gpu_tolerations
            ),
        ),
        stuck_after_seconds=stuck_after,
        force_delete_after_seconds=force_delete_after or None,
        max_concurrent_reconciles=max_concurrent_reconciles,
        max_concurrent_creates=max_concurrent_creates,
        lease_namespace=leader_election_namespace if leader_elect else None,
        lease_name=leader_election_id,
        lease_identity=leader_election_identity,
        stuck_reconcile_seconds=reconcile_stuck_after,
        resync_seconds=resync_period,
        progress_url=(progress_url or f"https://trainingjob-operator.{leader_election_namespace}.svc:{progress_port}")
        if progress_port
        else None,
    )
    webhooks = webhook_settings(
        webhook_port,
        webhook_bind,
        webhook_url,
        leader_election_namespace,
        default_image,
        webhook_cert_validity,
        webhook_ca_validity,
    )
    run_operator(
        config,
        list(namespaces),
        log_format,
        log_level,
        liveness_endpoint,
        leader_election_namespace,
        progress_port,
        progress_bind,
        metrics_port,
        metrics_bind,
        webhooks,
    )
