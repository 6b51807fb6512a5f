"""The HTTPS server the API server calls: /convert (ConversionReview), /mutate and /validate (AdmissionReview),
and /healthz (what other operators probe before taking the webhooks over).

Its certificate can be replaced while it runs (use()): new connections get the new one, so a rotation needs no
restart. The answers are computed here from pure functions (api/conversion_review.py, defaulting.py) and the
cluster lookups of validation.py.

Every port can be reached by pods, so the server is bounded (limits.py: body caps, requests and bytes in flight;
connections.py: a deadline for each request's headers and a cap on connections),
parses big conversions in a worker process (conversion_pool.py), answers every body it cannot read with 400 and a
reason, and, where the API server is set up to present a client certificate, lets only it call /mutate and
/validate (client_auth.py).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from aiohttp import web

from trainingjob import certs
from trainingjob.api import webhook_config as w
from trainingjob.http_bodies import CallerGone, MalformedBody, parse_json, read_body
from trainingjob.webhooks.admission import AdmissionRequest, Verdict, parse_review, review_response
from trainingjob.webhooks.client_auth import ApiServerCallers
from trainingjob.webhooks.connections import ConnectionLimits, FramedSite
from trainingjob.webhooks.conversion_pool import ConversionPool, ConversionUnavailable
from trainingjob.webhooks.limits import Busy, RequestBudget, ServerLimits

logger = logging.getLogger(__name__)
Decide = Callable[[AdmissionRequest], Awaitable[Verdict]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = tuple[web.Response, str]  # the response and its outcome, as the metrics name it
# Refusals by HTTP status, as the metrics name their outcome.
REFUSALS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    408: "too_slow",
    413: "too_large",
    503: "busy",
}


class WebhookObserver(Protocol):
    """What the server reports of each request it answers (OperatorMetrics in the operator)."""

    def answered(self, webhook: str, outcome: str, seconds: float) -> None: ...

    def converted(self, from_version: str, to_version: str, count: int) -> None: ...

    def connection_closed(self, reason: str) -> None: ...


class Unobserved:
    """No metrics: the server as tests and tools start it."""

    def answered(self, webhook: str, outcome: str, seconds: float) -> None:
        pass

    def converted(self, from_version: str, to_version: str, count: int) -> None:
        pass

    def connection_closed(self, reason: str) -> None:
        pass


class PortUnavailable(RuntimeError):
    """The webhook port cannot be bound (taken, or not allowed): retrying will not help."""


class WebhookServer:
    def __init__(
        self,
        mutate: Decide,
        validate: Decide,
        observer: WebhookObserver | None = None,
        limits: ServerLimits | None = None,
        callers: ApiServerCallers | None = None,
        connections: ConnectionLimits | None = None,
    ) -> None:
        """`callers`: who may call /mutate and /validate (None: anyone who reaches the port; see client_auth.py).
        `connections`: the header deadline and connection cap (connections.py)."""
        self.mutate = mutate
        self.validate = validate
        self.observer = observer or Unobserved()
        self.limits = limits or ServerLimits()
        self.budget = RequestBudget(self.limits)
        self.pool = ConversionPool()
        self.callers = callers
        self.connections = connections or ConnectionLimits()
        self.site: FramedSite | None = None
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if callers is not None:
            callers.require_on(self.context)
        self.runner: web.AppRunner | None = None

    def use(self, serving: certs.Pair) -> None:
        """Serve this certificate from the next connection on. ssl loads files only: write them to a private
        directory, load them, and remove them (the key stays in memory alone)."""
        with tempfile.TemporaryDirectory(prefix="tj-webhook-") as directory:
            cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            key.touch(mode=0o600)
            key.write_text(serving.key_pem)
            cert.write_text(serving.cert_pem)
            self.context.load_cert_chain(cert, key)

    async def convert(self, raw: bytes) -> Answer:
        try:
            answer = await self.pool.answer(raw)
        except MalformedBody as error:
            raise web.HTTPBadRequest(text=str(error)) from None
        except ConversionUnavailable as error:
            raise web.HTTPServiceUnavailable(text=str(error), headers={"Retry-After": "1"}) from None
        if not answer.converted:
            logger.warning("conversion failed: %s", answer.message)
        for (source, target), count in answer.counts.items():
            self.observer.converted(source, target, count)
        response = web.Response(body=answer.body, content_type="application/json")
        return response, "converted" if answer.converted else "failed"

    def admission(self, decide: Decide) -> Callable[[bytes], Awaitable[Answer]]:
        async def handle(raw: bytes) -> Answer:
            try:
                review = parse_review(parse_json(raw))
                verdict = await decide(review)
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
                # A body no API server sends (a stranger's, or an object of the wrong types before the schema
                # refuses it): 400 with the reason, never a 500.
                raise web.HTTPBadRequest(text=f"cannot judge this AdmissionReview: {error}"[:1024]) from None
            if not verdict.allowed:
                logger.info("denied %s %s/%s: %s", review.operation, review.namespace, review.name, verdict.message)
            return web.json_response(review_response(review.uid, verdict)), "allowed" if verdict.allowed else "denied"

        return handle

    def observed(self, webhook: str, handler: Callable[[bytes], Awaitable[Answer]], cap: int) -> Handler:
        """The handler behind the server's bounds (who may call, body size, requests and bytes in flight), counted
        by outcome and timed from when it starts (body read included) to its answer: the operator's share of each
        call the API server waits on; the API server's own metrics add the network and any wait for the loop."""

        async def handle(request: web.Request) -> web.StreamResponse:
            started, outcome = time.perf_counter(), "error"
            try:
                if webhook != "convert" and self.callers is not None:
                    self.callers.check(request)
                response, outcome = await self.bounded(request, handler, cap)
                return response
            except web.HTTPException as error:
                outcome = REFUSALS.get(error.status, "error")
                raise
            except CallerGone as gone:
                outcome = "abandoned"
                logger.info("webhook %s: %s", webhook, gone)
                raise web.HTTPBadRequest(text=str(gone)) from None  # written to no one, quietly
            finally:
                self.observer.answered(webhook, outcome, time.perf_counter() - started)

        return handle

    async def bounded(self, request: web.Request, handler: Callable[[bytes], Awaitable[Answer]], cap: int) -> Answer:
        """Read at most `cap` bytes of body, within the budget of requests and bytes in flight, then answer."""
        declared = request.content_length
        if declared is not None and declared > cap:
            raise web.HTTPRequestEntityTooLarge(max_size=cap, actual_size=declared)
        try:
            async with self.budget.reserve(cap if declared is None else declared):
                try:
                    async with asyncio.timeout(self.limits.body_seconds):
                        raw = await read_body(request, cap + 1)
                except TimeoutError:
                    raise web.HTTPRequestTimeout(text="the body did not arrive in time") from None
                if len(raw) > cap:
                    raise web.HTTPRequestEntityTooLarge(max_size=cap, actual_size=len(raw))
                return await handler(raw)
        except Busy as busy:
            logger.warning("webhook request refused for now: %s", busy)
            retry = {"Retry-After": "1"}
            raise web.HTTPServiceUnavailable(text="too many webhook requests in flight", headers=retry) from None

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.limits.admission_bytes)
        admission, conversion = self.limits.admission_bytes, self.limits.conversion_bytes
        app.router.add_post(w.CONVERT_PATH, self.observed("convert", self.convert, conversion))
        app.router.add_post(w.MUTATE_PATH, self.observed("mutate", self.admission(self.mutate), admission))
        app.router.add_post(w.VALIDATE_PATH, self.observed("validate", self.admission(self.validate), admission))
        app.router.add_get(w.HEALTH_PATH, self.health)
        return app

    async def start(self, host: str, port: int) -> None:
        # No lingering: a body refused unread (too big, a caller not let in) is not read to its end first.
        self.runner = web.AppRunner(self.app(), access_log=None, lingering_time=0)
        await self.runner.setup()
        self.site = FramedSite(self.runner, host, port, self.context, self.connections, self.observer.connection_closed)
        try:
            await self.site.start()
        except OSError as error:
            await self.stop()
            raise PortUnavailable(f"cannot serve the webhooks on {host}:{port}: {error.strerror or error}") from None
        logger.info("webhook server listening on https://%s:%d", host, port)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        self.pool.close()
