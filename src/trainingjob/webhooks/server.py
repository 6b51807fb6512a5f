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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

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


def conversion_review(body: Any) -> dict[str, Any]:
    """The answer to a ConversionReview: every object converted, or a failure naming the one that could not be."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict) or "uid" not in request:
        raise ValueError("not a ConversionReview")
    desired = request.get("desiredAPIVersion", "")
    response: dict[str, Any] = {"uid": request["uid"]}
    try:
        response["convertedObjects"] = [convert(obj, desired) for obj in request.get("objects") or []]
        response["result"] = {"status": "Success"}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": f"cannot convert to {desired}: {error!r}"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


async def _json(request: web.Request) -> Any:
    try:
        return await request.json(loads=json.loads)
    except ValueError as error:
        raise web.HTTPBadRequest(text=f"body is not JSON: {error}") from None


class PortUnavailable(RuntimeError):
    """The webhook port cannot be bound (taken, or not allowed): retrying will not help."""


class WebhookServer:
    def __init__(self, mutate: Decide, validate: Decide) -> None:
        self.mutate = mutate
        self.validate = validate
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

    async def convert(self, request: web.Request) -> web.Response:
        try:
            answer = conversion_review(await _json(request))
        except ValueError as error:
            raise web.HTTPBadRequest(text=str(error)) from None
        return web.json_response(answer)

    def admission(self, decide: Decide) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            try:
                review = parse_review(await _json(request))
            except ValueError as error:
                raise web.HTTPBadRequest(text=str(error)) from None
            verdict = await decide(review)
            if not verdict.allowed:
                logger.info("denied %s %s/%s: %s", review.operation, review.namespace, review.name, verdict.message)
            return web.json_response(review_response(review.uid, verdict))

        return handle

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def start(self, host: str, port: int) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(w.CONVERT_PATH, self.convert)
        app.router.add_post(w.MUTATE_PATH, self.admission(self.mutate))
        app.router.add_post(w.VALIDATE_PATH, self.admission(self.validate))
        app.router.add_get(w.HEALTH_PATH, self.health)
        self.runner = web.AppRunner(app, access_log=None)
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
