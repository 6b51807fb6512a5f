"""The HTTPS endpoint workers POST progress to. Authenticates, authorizes and validates every report, then
hands it to the reconciler, which writes at most one status update per job every few seconds (newest wins)."""

from __future__ import annotations

import datetime
import logging
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from aiohttp import web
from kubernetes_asyncio import client

from trainingjob.progress.auth import authorize, caller_from_review, review_token
from trainingjob.progress.report import MAX_BODY_BYTES, Report, ReportError, parse_report
from trainingjob.progress.tls import TlsMaterial
from trainingjob.reconcile.observed import PodView

logger = logging.getLogger(__name__)
ROUTE = "/v1/namespaces/{namespace}/trainingjobs/{name}/progress"


class ProgressSink(Protocol):
    """What the endpoint needs from the reconciler."""

    def job_uid(self, key: tuple[str, str]) -> str | None: ...
    def job_pods(self, key: tuple[str, str]) -> list[PodView]: ...
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
    ) -> None:
        self.api = api
        self.sink = sink
        self.reporters = reporters
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))

    async def handle(self, request: web.Request) -> web.Response:
        key = (request.match_info["namespace"], request.match_info["name"])
        try:
            await self.accept(request, key)
        except ReportError as error:
            if error.status >= 500 or error.status in (401, 403):
                logger.info("progress report for %s/%s refused (%d): %s", *key, error.status, error.reason)
            return web.json_response({"reason": error.reason}, status=error.status)
        return web.json_response({"accepted": True}, status=202)

    async def accept(self, request: web.Request, key: tuple[str, str]) -> None:
        """Cheap checks first (size, token present), then the API server (TokenReview), then the body."""
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            raise ReportError(413, f"report is larger than {MAX_BODY_BYTES} bytes")
        token = _bearer(request)
        raw = await request.content.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            raise ReportError(413, f"report is larger than {MAX_BODY_BYTES} bytes")
        caller = caller_from_review(await review_token(self.api, token))
        job_uid = self.sink.job_uid(key)
        if job_uid is None:
            raise ReportError(404, f"trainingjob {key[0]}/{key[1]} not found")
        authorize(caller, key[0], job_uid, self.sink.job_pods(key), self.reporters)
        report = parse_report(raw, self.clock())
        if not self.sink.accepts_progress():
            raise ReportError(503, "this replica is not the leader; retry")
        self.sink.report_progress(key, report)


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
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=ssl_context(material)).start()
    logger.info("progress endpoint listening on https://%s:%d", host, port)
    return runner
