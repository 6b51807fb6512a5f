"""The node's HTTPS endpoint: /containerLogs/<ns>/<pod>/<container> (what `kubectl logs` reaches through the API
server) and /healthz.

Authentication and authorization as a kubelet with webhook authorization: the caller must present a client
certificate signed by the cluster CA (the API server uses its kubelet-client certificate), and a
SubjectAccessReview must allow that user `get` on `nodes/proxy` for this node (the kubelet maps /containerLogs to
the `proxy` subresource). Answers are cached for a minute, as the kubelet caches them.

Every worker on the node can reach the port, but only a holder of a cluster certificate gets past the TLS
handshake, so what a stranger can do is start handshakes: each was held 60 s (asyncio's default), now
LOG_PORT_LIMITS.handshake_seconds (issue 41). Past the handshake (the API server): a `kubectl logs -f` stream lasts
as long as it follows (no lifetime), an idle connection is kept 120 s (longer than the API server's own 90 s idle
timeout, so it is the one that closes it), and the open connections are capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from trainingjob.forwarding import PortLimits, serve_bounded
from trainingjob.node.api.client import Api, ApiError
from trainingjob.node.config import NodeConfig
from trainingjob.node.logs.inotify import directory_watch
from trainingjob.node.logs.logquery import LogQuery, LogQueryError, parse_query, parse_record, select, tail_start
from trainingjob.node.runtime.containers import ContainerProcess

log = logging.getLogger(__name__)
AUTHZ_CACHE_SECONDS = 60.0
FOLLOW_CHECK_SECONDS = 5.0
LOG_PORT_LIMITS = PortLimits(idle_seconds=120.0, lifetime=None, max_connections=256, per_address=256)

# (namespace, pod, container, previous) -> the attempt to read, or an error message (status, text)
Resolver = Callable[[str, str, str, bool], "ContainerProcess | tuple[int, str]"]


def identity(request: web.Request) -> tuple[str, list[str]] | None:
    """(user, groups) from the verified client certificate: CN and O, as the API server maps them."""
    certificate = request.transport.get_extra_info("peercert") if request.transport else None
    if not certificate:
        return None
    user, groups = "", []
    for rdn in certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return (user, groups) if user else None


class LogServer:
    def __init__(self, config: NodeConfig, api: Api, resolve: Resolver, limits: PortLimits = LOG_PORT_LIMITS) -> None:
        self.config = config
        self.limits = limits
        self.api = api
        self.resolve = resolve
        self._decisions: dict[tuple[str, tuple[str, ...]], tuple[bool, float]] = {}
        self.runner: web.AppRunner | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.config.ca_file)
        context.load_cert_chain(self.config.serving_cert_file, self.config.serving_key_file)
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    async def start(self, host: str) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self.container_logs)
        self.runner = await serve_bounded(app, host, self.config.port, self.limits, self.ssl_context())

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _allowed(self, user: str, groups: list[str]) -> bool:
        key = (user, tuple(groups))
        cached = self._decisions.get(key)
        if cached and time.monotonic() - cached[1] < AUTHZ_CACHE_SECONDS:
            return cached[0]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": groups,
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "nodes",
                    "subresource": "proxy",
                    "name": self.config.name,
                },
            },
        }
        try:
            answer = await self.api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        except ApiError as error:
            log.warning("SubjectAccessReview failed: %s", error)
            return False
        allowed = bool((answer.get("status") or {}).get("allowed"))
        self._decisions[key] = (allowed, time.monotonic())
        return allowed

    async def container_logs(self, request: web.Request) -> web.StreamResponse:
        who = identity(request)
        if who is None:
            return web.Response(status=401, text="Unauthorized")
        user, groups = who
        if not await self._allowed(user, groups):
            message = f"Forbidden (user={user}, verb=get, resource=nodes, subresource=proxy)"
            return web.Response(status=403, text=message)
        try:
            query = parse_query(dict(request.query))
        except LogQueryError as error:
            return web.Response(status=400, text=str(error))
        info = request.match_info
        target = self.resolve(info["namespace"], info["pod"], info["container"], query.previous)
        if isinstance(target, tuple):
            return web.Response(status=target[0], text=target[1])
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
            await stream_log(target, query, response)
        return response


async def stream_log(process: ContainerProcess, query: LogQuery, response: web.StreamResponse) -> None:
    """Write the selected part of the log, then (with follow) new lines until the container has exited."""
    budget = query.limit_bytes
    watch = directory_watch(process.directory) if query.follow else None
    try:
        try:
            with process.log_path.open("rb") as handle:
                lines = handle.readlines()
                offset = handle.tell()
        except FileNotFoundError:
            lines, offset = [], 0
        if lines and not lines[-1].endswith(b"\n"):
            offset -= len(lines.pop())
        start = tail_start(lines, query.tail_lines)
        records = (r for r in map(parse_record, lines[start:]) if r is not None)
        budget = await _write(response, select(records, query), budget)
        if watch is None or budget == 0:
            return
        while True:
            exited = process.exited() is not None
            with process.log_path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            offset += len(complete)
            fresh = (r for r in map(parse_record, complete.splitlines(keepends=True)) if r is not None)
            budget = await _write(response, select(fresh, query), budget)
            if exited or budget == 0:
                return
            await watch.wait(FOLLOW_CHECK_SECONDS)
    finally:
        if watch is not None:
            watch.close()


async def _write(response: web.StreamResponse, chunks: Any, budget: int | None) -> int | None:
    for chunk in chunks:
        if budget is not None:
            chunk = chunk[:budget]
            budget -= len(chunk)
        await response.write(chunk)
        if budget == 0:
            break
    return budget
