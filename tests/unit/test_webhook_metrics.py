"""The webhook server counts and times every request it answers, over real HTTP: what `/metrics` shows of the
webhooks (the API server's own webhook metrics are out of reach on a managed control plane)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.api.conversion_review import conversions
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.server import WebhookServer


def job(api_version: str, name: str) -> dict[str, Any]:
    spec = {"framework": "pytorch", "image": "train:1", "command": ["python"], "workers": 2}
    if api_version.endswith("/v1"):
        spec = {"framework": "pytorch", "image": "train:1", "command": ["python"], "numWorkers": 2}
    return {"apiVersion": api_version, "kind": c.KIND, "metadata": {"name": name}, "spec": spec}


def conversion(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    request = {"uid": "u1", "desiredAPIVersion": desired, "objects": list(objects)}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}


def admission(name: str) -> dict[str, Any]:
    request = {
        "uid": "u2",
        "operation": "CREATE",
        "namespace": "team",
        "name": name,
        "kind": {"group": c.GROUP, "version": c.V1ALPHA1, "kind": c.KIND},
        "object": job(f"{c.GROUP}/{c.V1ALPHA1}", name),
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def allow(_: AdmissionRequest) -> Verdict:
    return Verdict()


async def deny_bad(request: AdmissionRequest) -> Verdict:
    return Verdict().deny("no") if request.name == "bad" else Verdict()


def serve_requests(metrics: OperatorMetrics) -> list[int]:
    """Post a mix of reviews to a server reporting to `metrics`; the HTTP status of each."""
    v1, v1alpha1 = f"{c.GROUP}/{c.V1}", f"{c.GROUP}/{c.V1ALPHA1}"
    posts = [
        (w.CONVERT_PATH, conversion(v1, job(v1alpha1, "a"), job(v1alpha1, "b"))),
        (w.CONVERT_PATH, conversion(v1alpha1, job(v1, "c"))),
        (w.CONVERT_PATH, conversion(f"{c.GROUP}/v9", job(v1, "d"))),
        (w.CONVERT_PATH, {"not": "a review"}),
        (w.MUTATE_PATH, admission("good")),
        (w.VALIDATE_PATH, admission("good")),
        (w.VALIDATE_PATH, admission("bad")),
    ]

    async def scenario() -> list[int]:
        server = TestServer(WebhookServer(allow, deny_bad, metrics).app())
        await server.start_server()
        try:
            async with ClientSession() as session:
                statuses = []
                for path, body in posts:
                    async with session.post(server.make_url(path), json=body) as response:
                        statuses.append(response.status)
                return statuses
        finally:
            await server.close()

    return asyncio.run(scenario())


def test_every_webhook_request_is_counted_by_outcome_and_timed() -> None:
    metrics = OperatorMetrics()
    assert serve_requests(metrics) == [200, 200, 200, 400, 200, 200, 200]

    def requests(webhook: str, outcome: str) -> float | None:
        labels = {"webhook": webhook, "outcome": outcome}
        return metrics.registry.get_sample_value("trainingjob_webhook_requests_total", labels)

    assert requests("convert", "converted") == 2
    assert requests("convert", "failed") == 1  # answered 200 with a Failure result: the API server's request fails
    assert requests("convert", "bad_request") == 1
    assert requests("mutate", "allowed") == 1
    assert requests("validate", "allowed") == 1
    assert requests("validate", "denied") == 1
    timed = {
        webhook: metrics.registry.get_sample_value("trainingjob_webhook_duration_seconds_count", {"webhook": webhook})
        for webhook in ("convert", "mutate", "validate")
    }
    assert timed == {"convert": 4, "mutate": 1, "validate": 2}


def test_converted_objects_are_counted_by_source_and_target_version() -> None:
    metrics = OperatorMetrics()
    serve_requests(metrics)

    def converted(source: str, target: str) -> float | None:
        labels = {"from_version": source, "to_version": target}
        return metrics.registry.get_sample_value("trainingjob_converted_objects_total", labels)

    assert converted(c.V1ALPHA1, c.V1) == 2  # both objects of one review
    assert converted(c.V1, c.V1ALPHA1) == 1
    assert converted(c.V1, "v9") is None  # a failed review converted nothing


def test_conversions_of_a_review_that_is_none() -> None:
    assert not conversions({"request": "x"})
    assert not conversions([1])
    assert conversions(conversion("ml.example.com/v1", {"apiVersion": "ml.example.com/v1alpha1"}, "junk")) == {
        ("v1alpha1", "v1"): 1
    }
