"""The webhook server under abuse (issue 41), over real HTTP: bodies too big or too deep, the wrong types, more
requests than it takes at once, and callers that are not the API server. Every refusal is a 4xx/503 with a
reason, never a 500, and nothing is read past its cap."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from tests.unit.test_webhook_metrics import admission, conversion, job
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.api.conversion_review import answer_conversion
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.conversion_pool import ConversionPool
from trainingjob.webhooks.limits import ServerLimits
from trainingjob.webhooks.server import WebhookServer

V1, V1ALPHA1 = f"{c.GROUP}/{c.V1}", f"{c.GROUP}/{c.V1ALPHA1}"
SMALL = ServerLimits(admission_bytes=4096, conversion_bytes=8192, bytes_in_flight=16384, wait_seconds=0.2)


async def allow(_: AdmissionRequest) -> Verdict:
    return Verdict()


def post_all(
    posts: list[tuple[str, bytes]], limits: ServerLimits = SMALL, metrics: OperatorMetrics | None = None
) -> list[tuple[int, str]]:
    """(status, text) of each raw POST, one after the other."""

    async def scenario() -> list[tuple[int, str]]:
        server = TestServer(WebhookServer(allow, allow, metrics, limits).app())
        await server.start_server()
        try:
            async with ClientSession() as session:
                answers = []
                for path, body in posts:
                    headers = {"Content-Type": "application/json"}
                    async with session.post(server.make_url(path), data=body, headers=headers) as response:
                        answers.append((response.status, await response.text()))
                return answers
        finally:
            await server.close()

    return asyncio.run(scenario())


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def review_with(path: str, change: Callable[[dict[str, Any]], None]) -> tuple[str, bytes]:
    body = conversion(V1, job(V1ALPHA1, "a")) if path == w.CONVERT_PATH else admission("a")
    change(body["request"])
    return path, json.dumps(body).encode()


MALFORMED = [
    (w.CONVERT_PATH, deep(100_000)[:8000], "nests deeper than"),
    (w.CONVERT_PATH, b'{"request": ', "not valid JSON"),
    (w.MUTATE_PATH, deep(2000), "nests deeper than 100"),
    (w.CONVERT_PATH, deep(2000), "nests deeper than 100"),
    (w.VALIDATE_PATH, b"\xff\xfe", "not valid JSON"),
    (*review_with(w.CONVERT_PATH, lambda r: r.update(objects="x")), "list of objects"),
    (*review_with(w.CONVERT_PATH, lambda r: r.update(objects=[1, 2])), "list of objects"),
    (*review_with(w.CONVERT_PATH, lambda r: r.update(uid=5)), "needs a uid"),
    (*review_with(w.CONVERT_PATH, lambda r: r.update(desiredAPIVersion=["v1"])), "desiredAPIVersion"),
    (*review_with(w.MUTATE_PATH, lambda r: r["object"].update(metadata="x")), "object.metadata must be an object"),
    (*review_with(w.MUTATE_PATH, lambda r: r["object"].update(spec=[1])), "object.spec must be an object"),
    (*review_with(w.VALIDATE_PATH, lambda r: r.update(kind="TrainingJob")), "request.kind must be an object"),
    (*review_with(w.VALIDATE_PATH, lambda r: r.update(oldObject=[])), "oldObject must be an object"),
    (*review_with(w.VALIDATE_PATH, lambda r: r.update(userInfo={"groups": "admins"})), "groups must be a list"),
    (*review_with(w.MUTATE_PATH, lambda r: r.update(namespace=7)), "request.namespace must be a string"),
]


@pytest.mark.parametrize(("path", "body", "reason"), MALFORMED)
def test_a_malformed_body_is_refused_with_400_and_a_reason(path: str, body: bytes, reason: str) -> None:
    limits = ServerLimits(wait_seconds=0.2)
    [(status, text)] = post_all([(path, body)], limits)
    assert status == 400 and reason in text, (status, text)


def test_wrong_types_deep_in_the_spec_never_give_500() -> None:
    """Before the schema runs (mutating admission), an object may carry any type anywhere."""
    posts = []
    for spec in ({"workers": "many"}, {"hyperparameters": [1]}, {"scheduling": "x"}, {"env": {"a": 1}}):
        for path in (w.MUTATE_PATH, w.VALIDATE_PATH):
            posts.append(review_with(path, lambda r, s=spec: r["object"].update(spec={**r["object"]["spec"], **s})))
    assert {status for status, _ in post_all(posts, ServerLimits(wait_seconds=0.2))} <= {200, 400}


def test_bodies_past_the_cap_are_refused_unread() -> None:
    metrics = OperatorMetrics()
    padding = {"padding": "x" * 5000}
    too_big = [
        (w.MUTATE_PATH, json.dumps({**admission("a"), **padding}).encode()),
        (w.CONVERT_PATH, json.dumps({**conversion(V1, job(V1ALPHA1, "a")), **padding, "more": "y" * 4000}).encode()),
    ]
    fits = [(w.CONVERT_PATH, json.dumps({**conversion(V1, job(V1ALPHA1, "a")), **padding}).encode())]
    answers = post_all(too_big + fits, metrics=metrics)
    assert [status for status, _ in answers] == [413, 413, 200]
    too_large = {"webhook": "convert", "outcome": "too_large"}
    assert metrics.registry.get_sample_value("trainingjob_webhook_requests_total", too_large) == 1


def test_a_body_without_a_length_is_cut_at_the_cap() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b" " * 1024

    async def scenario() -> int:
        server = TestServer(WebhookServer(allow, allow, None, SMALL).app())
        await server.start_server()
        try:
            async with ClientSession() as session, session.post(server.make_url(w.CONVERT_PATH), data=chunks()) as r:
                return r.status
        finally:
            await server.close()

    assert asyncio.run(scenario()) == 413


def test_requests_beyond_the_limit_wait_then_get_503() -> None:
    """One slot: a second admission request waits for it, and is refused (503, Retry-After) when it does not
    come free in time, while /healthz is answered all along."""
    release, holding = asyncio.Event(), asyncio.Event()

    async def held(_: AdmissionRequest) -> Verdict:
        holding.set()
        await release.wait()
        return Verdict()

    async def scenario() -> tuple[int, int, str | None, int]:
        limits = ServerLimits(requests=1, wait_seconds=0.2)
        server = TestServer(WebhookServer(held, allow, None, limits).app())
        await server.start_server()
        try:
            async with ClientSession() as session:
                url, body = server.make_url(w.MUTATE_PATH), admission("a")
                first = asyncio.create_task(session.post(url, json=body))
                await holding.wait()
                async with session.post(url, json=body) as second:
                    busy, retry = second.status, second.headers.get("Retry-After")
                async with session.get(server.make_url(w.HEALTH_PATH)) as health:
                    healthy = health.status
                release.set()
                async with await first as answered:
                    return answered.status, busy, retry, healthy
        finally:
            await server.close()

    assert asyncio.run(scenario()) == (200, 503, "1", 200)


def test_a_big_conversion_is_answered_by_the_worker_process_exactly_as_inline() -> None:
    raw = json.dumps(conversion(V1ALPHA1, *(job(V1, f"j{i}") for i in range(50)))).encode()

    async def scenario() -> bytes:
        pool = ConversionPool(inline_bytes=0)
        try:
            return (await pool.answer(raw)).body
        finally:
            pool.close()

    worker_body = asyncio.run(scenario())
    assert worker_body == answer_conversion(raw).body
    assert len(json.loads(worker_body)["response"]["convertedObjects"]) == 50
