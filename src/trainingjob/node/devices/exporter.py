"""The node's DCGM-style exporter: `GET /metrics` on the node's address, port 9400 (dcgm-exporter's), published
where a scraper finds it.

A real GPU cluster runs NVIDIA's dcgm-exporter as a DaemonSet behind the Service `nvidia-dcgm-exporter` in the
namespace `gpu-operator`; Prometheus, and the operator's GPU telemetry (operator/gpu_telemetry.py), find its pods
through that Service's EndpointSlices. A local process node does the same for itself: it serves the metrics and
keeps an EndpointSlice `nvidia-dcgm-exporter-<node>` of that Service (created by `tj cluster up`) pointing at its
address, so the operator finds real and local exporters alike. Plain HTTP and no authentication, like
dcgm-exporter: the metrics carry pod names, nothing secret. A node without GPUs serves and publishes nothing.

Every worker can reach it, so its connections are bounded like the operator's metrics port (issue 41): before,
aiohttp's defaults held a half-sent request 3630 s and took any number of connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web

from trainingjob.forwarding import PortLimits, serve_bounded
from trainingjob.node.api.client import Api, ApiError
from trainingjob.node.devices.gpus import GpuInventory
from trainingjob.node.devices.telemetry import SAMPLE_SECONDS, GpuTelemetry, exposition

log = logging.getLogger(__name__)
EXPORTER_PORT = 9400
EXPORTER_NAMESPACE = "gpu-operator"
EXPORTER_SERVICE = "nvidia-dcgm-exporter"
PORT_NAME = "gpu-metrics"
MANAGED_BY = "node-agent.ml.example.com"  # a label value: no "/"
RETRY_MAX_SECONDS = 300.0
# A scraper keeps one connection per target; a few are plenty, and one pod cannot take them all.
EXPORTER_LIMITS = PortLimits(max_connections=64, per_address=8)


def exporter_slice(node: str, address: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{EXPORTER_SERVICE}-{node}",
            "namespace": EXPORTER_NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": EXPORTER_SERVICE,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}, "nodeName": node}],
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
    }


class GpuExporter:
    def __init__(
        self,
        api: Api,
        telemetry: GpuTelemetry,
        inventory: GpuInventory,
        node: str,
        address: str,
        port: int,
        limits: PortLimits = EXPORTER_LIMITS,
    ) -> None:
        self.api = api
        self.telemetry = telemetry
        self.inventory = inventory
        self.node = node
        self.address = address
        self.port = port
        self.limits = limits
        self.text = exposition([], inventory, node)
        self.runner: web.AppRunner | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=self.text, content_type="text/plain", charset="utf-8")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self.runner = await serve_bounded(app, self.address, self.port, self.limits)
        log.info("node %s exports GPU metrics on %s:%d/metrics", self.node, self.address, self.port)

    async def run(self) -> None:
        """Sample every SAMPLE_SECONDS; publish the EndpointSlice until it is there (retries back off to 5 min)."""
        failures, retry_at = 0, 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                self.text = exposition(self.telemetry.sample(), self.inventory, self.node)
            except Exception:
                log.exception("sampling the GPUs of node %s failed", self.node)
            if failures >= 0 and loop.time() >= retry_at:
                if await self._publish(quiet=failures > 0):
                    failures = -1  # published: nothing more to do
                else:
                    failures += 1
                    retry_at = loop.time() + min(RETRY_MAX_SECONDS, SAMPLE_SECONDS * 2**failures)
            await asyncio.sleep(SAMPLE_SECONDS)

    async def _publish(self, quiet: bool) -> bool:
        body = exporter_slice(self.node, self.address, self.port)
        path = f"/apis/discovery.k8s.io/v1/namespaces/{EXPORTER_NAMESPACE}/endpointslices"
        try:
            try:
                await self.api.create(path, body)
            except ApiError as error:
                if error.status != 409:
                    raise
                await self.api.patch(f"{path}/{body['metadata']['name']}", body)
        except ApiError as error:
            level = logging.DEBUG if quiet else logging.WARNING
            log.log(level, "publishing node %s's GPU exporter failed (retrying): %s", self.node, error)
            return False
        return True

    async def stop(self) -> None:
        if self.runner is not None:
            with contextlib.suppress(Exception):
                await self.runner.cleanup()
