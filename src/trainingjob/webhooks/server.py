"""The HTTPS server the API server calls: /convert (ConversionReview), /mutate and /validate (AdmissionReview),
and /healthz (what other operators probe before taking the webhooks over).

Its certificate can be replaced while it runs (use()): new connections get the new one, so a rotation needs no
restart. The answers are computed here from pure functions (api/conversion.py, defaulting.py) and the cluster
lookups of validation.py.
"""

from __future__ import annotations

import json
import logging
import ssl
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from trainingjob import certs
from trainingjob.api import webhook_config as w
from trainingjob.api.conversion import convert
from trainingjob.webhooks.admission import AdmissionRequest, Verdict, parse_review, review_response

logger = logging.getLogger(__name__)
# The API server converts a list in one ConversionReview (every item of `kubectl get trainingjobs.v1alpha1 -A`):
# thousands of jobs of a few KiB each. Bounded per request, never kept.
MAX_BODY_BYTES = 256 * 1024 * 1024
Decide = Callable[[AdmissionRequest], Awaitable[Verdict]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Answer = tuple[web.Response, str]  # the response and its outcome, as the metrics name it


class WebhookObserver(Protocol):
    """What the server reports of each request it answers (OperatorMetrics in the operator)."""

    def answered(self, webhook: str, outcome: str, seconds: float) -> None: ...

    def converted(self, from_version: str, to_version: str, count: int) -> None: ...


class Unobserved:
    """No metrics: the server as tests and tools start it."""

    def answered(self, webhook: str, outcome: str, seconds: float) -> None:
        pass

    def converted(self, from_version: str, to_version: str, count: int) -> None:
        pass


def conversions(body: Any) -> Counter[tuple[str, str]]:
    """How many objects of a ConversionReview go from which version to which (API versions without the group)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        return Counter()
    desired = _version(request.get("desiredAPIVersion"))
    objects = request.get("objects") or []
    return Counter((_version(obj.get("apiVersion")), desired) for obj in objects if isinstance(obj, dict))


def _version(api_version: Any) -> str:
    return str(api_version or "").rpartition("/")[2] or "unknown"


def conversion_review(body: Any) -> dict[str, Any]:
    """The answer to a ConversionReview: every object converted, or a failure naming the one that could not be."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not a ConversionReview")
    desired = request.get("desiredAPIVersion", "")
    response: dict[str, Any] = {"uid": request["uid"]}
    converted: list[dict[str, Any]] = []
    for obj in request.get("objects") or []:
        try:
            converted.append(convert(obj, desired, owned=True))  # parsed for this answer alone
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            message = f"cannot convert {_object_name(obj)} to {desired}: {error!r}"
            response.update(convertedObjects=[], result={"status": "Failure", "message": message})
            break
    else:
        response.update(convertedObjects=converted, result={"status": "Success"})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _object_name(obj: Any) -> str:
    metadata = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
    return "/".join(str(part) for part in (metadata.get("namespace"), metadata.get("name")) if part) or "an object"


async def _json(request: web.Request) -> Any:
    try:
        return await request.json(loads=json.loads)
    except ValueError as error:
        raise web.HTTPBadRequest(text=f"body is not JSON: {error}") from None


class PortUnavailable(RuntimeError):
    """The webhook port cannot be bound (taken, or not allowed): retrying will not help."""


class WebhookServer:
    def __init__(self, mutate: Decide, validate: Decide, observer: WebhookObserver | None = None) -> None:
        self.mutate = mutate
        self.validate = validate
        self.observer = observer or Unobserved()
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
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

    async def convert(self, request: web.Request) -> Answer:
        try:
            body = await _json(request)
            answer = conversion_review(body)
        except ValueError as error:
            raise web.HTTPBadRequest(text=str(error)) from None
        result = answer["response"]["result"]
        converted = result["status"] == "Success"
        if not converted:
            logger.warning("conversion failed: %s", result.get("message"))
        else:
            for (source, target), count in conversions(body).items():
                self.observer.converted(source, target, count)
        return web.json_response(answer), "converted" if converted else "failed"

    def admission(self, decide: Decide) -> Callable[[web.Request], Awaitable[Answer]]:
        async def handle(request: web.Request) -> Answer:
            try:
                review = parse_review(await _json(request))
            except ValueError as error:
                raise web.HTTPBadRequest(text=str(error)) from None
            verdict = await decide(review)
            if not verdict.allowed:
                logger.info("denied %s %s/%s: %s", review.operation, review.namespace, review.name, verdict.message)
            return web.json_response(review_response(review.uid, verdict)), "allowed" if verdict.allowed else "denied"

        return handle

    def observed(self, webhook: str, handler: Callable[[web.Request], Awaitable[Answer]]) -> Handler:
        """The handler, counted by outcome and timed from when it starts (body read included) to its answer: the
        operator's share of each call the API server waits on; the API server's own metrics add the network and
        the wait for this process's event loop."""

        async def handle(request: web.Request) -> web.StreamResponse:
            started, outcome = time.perf_counter(), "error"
            try:
                response, outcome = await handler(request)
                return response
            except web.HTTPBadRequest:
                outcome = "bad_request"
                raise
            finally:
                self.observer.answered(webhook, outcome, time.perf_counter() - started)

        return handle

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(w.CONVERT_PATH, self.observed("convert", self.convert))
        app.router.add_post(w.MUTATE_PATH, self.observed("mutate", self.admission(self.mutate)))
        app.router.add_post(w.VALIDATE_PATH, self.observed("validate", self.admission(self.validate)))
        app.router.add_get(w.HEALTH_PATH, self.health)
        return app

    async def start(self, host: str, port: int) -> None:
        self.runner = web.AppRunner(self.app(), access_log=None)
        await self.runner.setup()
        try:
            await web.TCPSite(self.runner, host, port, ssl_context=self.context).start()
        except OSError as error:
            await self.stop()
            raise PortUnavailable(f"cannot serve the webhooks on {host}:{port}: {error.strerror or error}") from None
        logger.info("webhook server listening on https://%s:%d", host, port)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
