"""What `tj operator` runs: preflight checks, gang API discovery, logging, then the operator process."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys

from kubernetes_asyncio import client
from kubernetes_asyncio import config as k8s_config

from trainingjob.config import OperatorSettings
from trainingjob.kube.tls_buffers import size_tls_read_buffers
from trainingjob.operator.logs import configure as configure_logging
from trainingjob.operator.preflight import (
    FORBIDDEN_GRACE,
    PreflightError,
    check_operator_namespace,
    wait_for_api_server,
)
from trainingjob.operator.process import ProcessOptions, Startup, run
from trainingjob.scheduling.discovery import api_client_fetch, served_gang_apis
from trainingjob.user_agent import OPERATOR, named
from trainingjob.webhooks.client_auth import ApiServerCallers
from trainingjob.webhooks.component import WebhookSettings
from trainingjob.webhooks.tls import Rotation

IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def in_cluster() -> bool:
    return "KUBERNETES_SERVICE_HOST" in os.environ and os.path.exists(IN_CLUSTER_TOKEN)


def run_operator(settings: OperatorSettings) -> None:
    """Block until the operator is stopped (SIGINT/SIGTERM); exit 1 with one line if it could not run."""
    configure_logging(settings.log_format, getattr(logging, settings.log_level.upper()))
    options = ProcessOptions(settings.resolved(), in_cluster=in_cluster(), webhooks=webhook_settings(settings))
    size_tls_read_buffers()  # before the first connection: each gets its buffer when it opens
    try:
        asyncio.run(main(options))
    except (PreflightError, Startup) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


def webhook_settings(settings: OperatorSettings) -> WebhookSettings | None:
    """The webhooks' settings (None: --webhook-port 0, no webhooks); their TLS Secret is in the operator's
    namespace."""
    given = settings.webhooks
    if not given.port:
        return None
    rotation = Rotation(ca_validity=given.ca_validity, cert_validity=given.cert_validity)
    return WebhookSettings(
        port=given.port,
        bind=given.bind,
        url=given.url,
        namespace=settings.operator_namespace,
        default_image=given.default_image,
        rotation=rotation,
        callers=ApiServerCallers(given.client_ca, frozenset(given.client_names)) if given.client_ca else None,
    )


async def main(options: ProcessOptions) -> None:
    """One event loop for everything: credentials, preflight, discovery, then the process until stopped."""
    if options.in_cluster:
        k8s_config.load_incluster_config()
    else:
        await k8s_config.load_kube_config()
    config = options.config
    async with named(client.ApiClient(), OPERATOR) as api:
        just_started = await wait_for_api_server(api)
        if config.lease_namespace is not None or options.settings.progress_port:
            lease = config.lease_name if config.lease_namespace is not None else None
            grace = FORBIDDEN_GRACE if just_started else 0.0  # its authorizer may lag its /readyz
            await check_operator_namespace(api, options.settings.operator_namespace, lease, grace)
        # The gang scheduling APIs the cluster serves (scheduling/discovery.py), read once before watching starts.
        gang_apis = await served_gang_apis(api_client_fetch(api))
    await run(dataclasses.replace(options, gang_apis=gang_apis))
