"""The HTTPS endpoint workers POST progress to. Authenticates, authorizes and validates every report, then
hands it to the reconciler, which writes at most one status update per job every few seconds (newest wins).

Bounded against abuse (progress/limits.py): connections are capped in number (in all and per client address) and
lifetime, requests in flight
are capped (503), a client address and a worker pod each get a request rate (429 with Retry-After, which the SDK
honours), the body must arrive within seconds (408), and TokenReviews are cached and run a few at a time.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aiohttp import web
from kubernetes_asyncio import client

from trainingjob.forwarding import GuardedSite
from trainingjob.http_bodies import CallerGone, read_body
from trainingjob.kube.meta import is_object_name
from trainingjob.progress.auth import Caller, JobPod, authorize, caller_from_review, review_token
from trainingjob.progress.limits import RateLimiter, ReviewCache, retry_after
from trainingjob.progress.order import ReportOrder
from trainingjob.progress.report import MAX_BODY_BYTES, Report, ReportError, parse_report
from trainingjob.progress.tls import TlsMaterial

logger = logging.getLogger(__name__)
ROUTE = "/v1/namespaces/{namespace}/trainingjobs/{name}/progress"


@dataclass(frozen=True)
class EndpointLimits:
    """How much one endpoint takes on. A well-behaved worker reports once every 2 s at most (the SDK's throttle)."""

    max_in_flight: int = 64
    max_reviews: int = 8
    pod_rate: float = 2.0
    pod_burst: int = 20
    address_rate: float = 10.0
    address_burst: int = 40
    body_seconds: float = 5.0
    max_connections: int = 256
    # A worker keeps one connection; 16 from one address leave room for pods behind one NAT address, and an
    # address alone can no longer take all 256.
    connections_per_address: int = 16
    connection_seconds: float = 15.0
    handshake_seconds: float = 5.0


class ProgressSink(Protocol):
    """What the endpoint needs from the reconciler."""

    def job_uid(self, key: tuple[str, str]) -> str | None: ...
    def job_pods(self, key: tuple[str, str]) -> list[JobPod]: ...
    def accepts_progress(self) -> bool: ...
    def report_progress(self, key: tuple[str, str], report: Report) -> None: ...


def _bearer(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ReportError(401, "missing bearer token")
    return token.strip()


class ProgressEndpoint:
    def __init__(
        self,
        api: client.ApiClient,
        sink: ProgressSink,
        reporters: tuple[int, ...],
        clock: Callable[[], datetime.datetime] | None = None,
        limits: EndpointLimits | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.sink = sink
        self.reporters = reporters
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.limits = limits or EndpointLimits()
        self.in_flight = 0
        self.review_slots = asyncio.Semaphore(self.limits.max_reviews)
        self.reviews = ReviewCache(clock=monotonic)
        self.order = ReportOrder()  # each pod's furthest report: a replay is refused
        self.by_address = RateLimiter(self.limits.address_rate, self.limits.address_burst, monotonic)
        self.by_pod = RateLimiter(self.limits.pod_rate, self.limits.pod_burst, monotonic)

    async def handle(self, request: web.Request) -> web.Response:
        key = (request.match_info["namespace"], request.match_info["name"])
        if not (is_object_name(key[0]) and is_object_name(key[1])):
            # Decoded from the path, so it may hold newlines or kilobytes: neither logged nor echoed back.
            return web.json_response({"reason": "no such trainingjob: the path names none"}, status=404)
        try:
            if self.in_flight >= self.limits.max_in_flight:
                raise ReportError(503, "too many reports in flight; retry", retry_after=1)
            self.in_flight += 1
            try:
                await self.accept(request, key)
            finally:
                self.in_flight -= 1
        except ReportError as error:
            if error.status >= 500 or error.status in (401, 403):
                logger.info("progress report for %s/%s refused (%d): %s", *key, error.status, error.reason)
            headers = {"Retry-After": retry_after(error.retry_after)} if error.retry_after is not None else None
            return web.json_response({"reason": error.reason}, status=error.status, headers=headers)
        return web.json_response({"accepted": True}, status=202)

    async def accept(self, request: web.Request, key: tuple[str, str]) -> None:
        """Cheap checks first (size, rate, token present), then the API server (TokenReview), then the body."""
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise ReportError(413, f"report is larger than {MAX_BODY_BYTES} bytes")
        wait = self.by_address.wait_seconds(request.remote or "")
        if wait:
            raise ReportError(429, "too many reports from this address", retry_after=wait)
        token = _bearer(request)
        try:
            async with asyncio.timeout(self.limits.body_seconds):
                raw = await read_body(request, MAX_BODY_BYTES + 1)
        except TimeoutError:
            raise ReportError(408, f"the report did not arrive within {self.limits.body_seconds:g}s") from None
        except CallerGone as gone:
            raise ReportError(400, str(gone)) from None  # answered to no one; not an error of ours
        if len(raw) > MAX_BODY_BYTES:
            raise ReportError(413, f"report is larger than {MAX_BODY_BYTES} bytes")
        caller = await self.review(token)
        job_uid = self.sink.job_uid(key)
        if job_uid is None:
            raise ReportError(404, f"trainingjob {key[0]}/{key[1]} not found")
        pod = authorize(caller, key[0], job_uid, self.sink.job_pods(key), self.reporters)
        wait = self.by_pod.wait_seconds(pod.uid or f"{key[0]}/{pod.name}")
        if wait:
            raise ReportError(429, f"pod {pod.name} reports too often", retry_after=wait)
        report = parse_report(raw, self.clock())
        if not self.sink.accepts_progress():
            raise ReportError(503, "this replica is not the leader; retry")
        self.order.admit(pod.uid or f"{key[0]}/{pod.name}", report)
        self.sink.report_progress(key, report)

    async def review(self, token: str) -> Caller:
        """TokenReview, answered from the cache when the same token was reviewed moments ago."""
        cached = self.reviews.get(token)
        if isinstance(cached, ReportError):
            raise ReportError(cached.status, cached.reason)
        if cached is not None:
            return cached
        async with self.review_slots:
            try:
                caller = caller_from_review(await review_token(self.api, token))
            except ReportError as error:
                if error.status == 401:
                    self.reviews.put(token, error, accepted=False)
                raise
        self.reviews.put(token, caller, accepted=True)
        return caller


def ssl_context(material: TlsMaterial) -> ssl.SSLContext:
    """ssl wants files: write them to a private temporary directory (the root filesystem may be read-only)."""
    directory = Path(tempfile.mkdtemp(prefix="tj-progress-"))
    (directory / "tls.crt").write_text(material.cert_pem)
    key_path = directory / "tls.key"
    key_path.write_text(material.key_pem)
    key_path.chmod(0o600)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "tls.crt", key_path)
    return context


async def serve(endpoint: ProgressEndpoint, material: TlsMaterial, host: str, port: int) -> web.AppRunner:
    app = web.Application(client_max_size=MAX_BODY_BYTES * 2)
    app.router.add_post(ROUTE, endpoint.handle)
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=endpoint.limits.connection_seconds)
    await runner.setup()
    limits = endpoint.limits
    site = GuardedSite(
        runner,
        host,
        port,
        ssl_context=ssl_context(material),
        max_connections=limits.max_connections,
        per_address=limits.connections_per_address,
        lifetime=limits.connection_seconds,
        handshake_timeout=limits.handshake_seconds,
    )
    await site.start()
    logger.info("progress endpoint listening on https://%s:%d", host, port)
    return runner
