"""/metrics, /healthz and /readyz on one plain-HTTP port (the progress endpoint has its own TLS port).

Every pod can reach this port (Prometheus scrapes it, the shipped NetworkPolicy lets every pod in), and the
kubelet's liveness probe comes here: so connections are bounded like the progress endpoint's (issue 41). Before,
aiohttp kept a connection that never finished its request for an hour (its keep-alive default, 3630 s) and took
any number of them: one pod holding a few thousand idle connections ran the process out of file descriptors, and
the liveness probe, the watches and the API calls failed with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from trainingjob.forwarding import PortLimits, serve_bounded
from trainingjob.operator.metrics import OperatorMetrics


def build_app(
    metrics: OperatorMetrics, live: Callable[[], tuple[bool, str]], ready: Callable[[], tuple[bool, str]]
) -> web.Application:
    async def scrape(_: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest, metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def probe(check: Callable[[], tuple[bool, str]]) -> Callable:
        async def handler(_: web.Request) -> web.Response:
            ok, detail = check()
            return web.Response(text=detail + "\n", status=200 if ok else 503)

        return handler

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    app.router.add_get("/healthz", probe(live))
    app.router.add_get("/readyz", probe(ready))
    return app


async def serve(app: web.Application, host: str, port: int, limits: PortLimits | None = None) -> web.AppRunner:
    return await serve_bounded(app, host, port, limits or PortLimits())
