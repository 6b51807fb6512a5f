"""The local backend's progress endpoint: the operator's protocol (docs/progress-protocol.md) on 127.0.0.1, so
`trainingjob.sdk.report_progress` works unchanged in a local run and its reports become `status.progress` the same
way (progress/report.py parses and folds them).

Plain HTTP on the loopback interface, with a random bearer token per worker written to a file only that run can
read: the SDK sends the token like a pod's ServiceAccount token, and the sink knows from it which job and worker
speaks. As with the operator's default, only worker 0 may report.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from trainingjob.progress.report import MAX_BODY_BYTES, Report, ReportError, parse_report

REPORTING_WORKER = 0


@dataclass(frozen=True)
class Reporter:
    """Who a token belongs to."""

    namespace: str
    job: str
    worker: int


class ProgressSink:
    """Receives progress reports for local runs and hands each accepted one to `deliver(reporter, report)`."""

    def __init__(self, deliver: Callable[[Reporter, Report], None]) -> None:
        self.deliver = deliver
        self.tokens: dict[str, Reporter] = {}
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        """Listen on a free loopback port (once); the base URL for TRAININGJOB_PROGRESS_URL."""
        if self.runner is None:
            app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
            app.router.add_post("/v1/namespaces/{namespace}/trainingjobs/{name}/progress", self.receive)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.runner = runner
            host, port = runner.addresses[0][:2]
            self.url = f"http://{host}:{port}"
        return self.url

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def issue(self, reporter: Reporter) -> str:
        token = secrets.token_urlsafe(32)
        self.tokens[token] = reporter
        return token

    def revoke(self, job: str) -> None:
        """Forget the tokens of every worker of `job` (its run ended or was replaced)."""
        self.tokens = {token: who for token, who in self.tokens.items() if who.job != job}

    async def receive(self, request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        reporter = self.tokens.get(token) if scheme == "Bearer" else None
        if reporter is None:
            return _refuse(401, "missing or unknown token")
        if (reporter.namespace, reporter.job) != (request.match_info["namespace"], request.match_info["name"]):
            return _refuse(403, "this token belongs to another job")
        if reporter.worker != REPORTING_WORKER:
            return _refuse(403, f"only worker {REPORTING_WORKER} reports progress")
        try:
            raw = await request.content.read(MAX_BODY_BYTES + 1)
            report = parse_report(raw, datetime.datetime.now(datetime.UTC))
        except ReportError as error:
            return _refuse(error.status, error.reason)
        self.deliver(reporter, report)
        return web.json_response({"accepted": True}, status=202)


def _refuse(status: int, reason: str) -> web.Response:
    return web.json_response({"reason": reason}, status=status)
