"""Start Kopf with our handlers, settings and configuration (what `tj operator` runs)."""

from __future__ import annotations

import asyncio
import logging
import sys

import kopf
from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from trainingjob.config import OperatorConfig
from trainingjob.operator.logs import install as install_log_context
from trainingjob.operator.preflight import PreflightError, check_operator_namespace
from trainingjob.operator.toggles import install as install_counted_toggles
from trainingjob.scheduling.discovery import api_client_fetch, served_gang_apis
from trainingjob.webhooks.component import WebhookSettings

LOG_FORMATS = {"json": kopf.LogFormat.JSON, "text": kopf.LogFormat.FULL}


def run_operator(
    config: OperatorConfig,
    namespaces: list[str],
    log_format: str = "text",
    log_level: str = "INFO",
    liveness_endpoint: str | None = None,
    operator_namespace: str = "trainingjob-system",
    progress_port: int = 0,
    progress_bind: str = "0.0.0.0",
    metrics_port: int = 0,
    metrics_bind: str = "0.0.0.0",
    webhooks: WebhookSettings | None = None,
) -> None:
    """Block until the operator is stopped (SIGINT/SIGTERM); exit 1 with one line if it could not run."""
    from trainingjob.operator import handlers  # registers the Kopf handlers

    if config.lease_namespace is not None or progress_port:
        lease = config.lease_name if config.lease_namespace is not None else None
        try:
            asyncio.run(preflight(handlers.in_cluster(), operator_namespace, lease))
        except PreflightError as error:
            print(f"error: {error}", file=sys.stderr)
            sys.exit(1)

    install_counted_toggles()  # Kopf's startup barrier without its cubic wake-ups (operator/toggles.py)
    gang_apis = asyncio.run(discover_gang_apis(handlers.in_cluster()))
    handlers.watch_gang_objects(gang_apis)
    level = getattr(logging, log_level.upper())
    kopf.configure(
        debug=level <= logging.DEBUG,
        verbose=level <= logging.INFO,
        quiet=level >= logging.WARNING,
        log_format=LOG_FORMATS[log_format],
        log_refkey="job",
    )
    logging.getLogger().setLevel(level)
    install_log_context()
    # Kopf logs every handler call at INFO; with an event per pod change that is noise, not information.
    logging.getLogger("kopf.objects").setLevel(max(level, logging.WARNING))
    asyncio.run(
        kopf.operator(
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            memo=kopf.Memo(
                config=config,
                operator_namespace=operator_namespace,
                progress_port=progress_port,
                progress_bind=progress_bind,
                metrics_port=metrics_port,
                metrics_bind=metrics_bind,
                gang_apis=gang_apis,
                webhook_settings=webhooks,
            ),
            liveness_endpoint=liveness_endpoint,
        )
    )


async def preflight(in_cluster: bool, namespace: str, lease_name: str | None) -> None:
    if in_cluster:
        k8s_config.load_incluster_config()
    else:
        await k8s_config.load_kube_config()
    async with client.ApiClient() as api:
        await check_operator_namespace(api, namespace, lease_name)


async def discover_gang_apis(in_cluster: bool) -> frozenset:
    """The gang scheduling APIs the cluster serves (scheduling/discovery.py), read once before watching starts."""
    if in_cluster:
        k8s_config.load_incluster_config()
    else:
        await k8s_config.load_kube_config()
    async with client.ApiClient() as api:
        return await served_gang_apis(api_client_fetch(api))
