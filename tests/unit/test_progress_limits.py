"""The progress endpoint's limits: rate buckets, the TokenReview cache, requests in flight, and the connection
guard (run on real local sockets, plain TCP: the guard sits below TLS and HTTP).

Proves: a bucket allows its burst then one request per 1/rate seconds and says how long to wait; maps stay
bounded; a review is cached by token hash for its TTL, never past the token's expiry, refusals briefly, server
errors never; one TokenReview serves repeated reports; requests beyond max_in_flight get 503 with Retry-After,
a pod beyond its rate 429 with Retry-After; connections beyond the cap are dropped at once and every connection
is cut after its lifetime.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from tests.unit.test_apply import FakeClock
from trainingjob.forwarding import ConnectionGuard
from trainingjob.progress import server as server_module
from trainingjob.progress.auth import Caller
from trainingjob.progress.limits import (
    BoundedMap,
    RateLimiter,
    ReviewCache,
    retry_after,
    token_expiry,
    token_key,
)
from trainingjob.progress.report import ReportError
from trainingjob.progress.server import EndpointLimits, ProgressEndpoint
from trainingjob.reconcile.observed import PodView


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.wait_seconds("pod") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.wait_seconds("pod") == pytest.approx(0.5)
    assert limiter.wait_seconds("other") == 0.0, "keys are independent"
    clock.now += 0.5
    assert limiter.wait_seconds("pod") == 0.0
    assert retry_after(0.2) == "1" and retry_after(2.1) == "3"


def test_maps_forget_the_least_recently_used() -> None:
    bounded: BoundedMap[int] = BoundedMap(max_keys=2)
    bounded.put("a", 1)
    bounded.put("b", 2)
    bounded.get("a")
    bounded.put("c", 3)
    assert (len(bounded), bounded.get("a"), bounded.get("b")) == (2, 1, None)


def jwt(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"header.{payload}.signature"


def test_the_review_cache_keeps_answers_briefly_and_never_the_token() -> None:
    clock = FakeClock()
    cache = ReviewCache(ttl=60, negative_ttl=10, clock=clock, wall_clock=lambda: 5000.0)
    token = jwt({"exp": 5030})
    cache.put(token, "caller", accepted=True)
    assert token not in str(cache.entries.entries) and token_key(token) in cache.entries.entries
    assert cache.get(token) == "caller"
    clock.now += 31
    assert cache.get(token) is None, "not past the token's own expiry (30 s)"
    cache.put("opaque", "refused", accepted=False)
    clock.now += 11
    assert cache.get("opaque") is None
    assert token_expiry("not-a-jwt") is None and token_expiry(jwt({"exp": True})) is None


CALLER = Caller("ns", "job-worker-0", "uid-0")
POD = PodView(name="job-worker-0", index=0, attempt=0, spec_hash="h", phase="Running", uid="uid-0", controller_uid="j")


class Sink:
    def __init__(self) -> None:
        self.reports: list[Any] = []

    def job_uid(self, key: tuple[str, str]) -> str | None:
        return "j"

    def job_pods(self, key: tuple[str, str]) -> list[PodView]:
        return [POD]

    def accepts_progress(self) -> bool:
        return True

    def report_progress(self, key: tuple[str, str], report: Any) -> None:
        self.reports.append(report)


def request(body: bytes = b'{"epoch": 1}', token: str = "t") -> web.Request:
    return make_mocked_request(
        "POST",
        "/v1/namespaces/ns/trainingjobs/job/progress",
        headers={"Authorization": f"Bearer {token}", "Content-Length": str(len(body))},
        match_info={"namespace": "ns", "name": "job"},
        payload=_payload(body),
    )


def _payload(body: bytes) -> Any:
    from aiohttp import streams
    from aiohttp.base_protocol import BaseProtocol

    loop = asyncio.get_event_loop()
    stream = streams.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    stream.feed_data(body)
    stream.feed_eof()
    return stream


@pytest.fixture
def reviewed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """TokenReview replaced by a recorder that accepts every token as CALLER (authorization logic stays real)."""
    reviews: list[str] = []

    async def fake_review_token(api: Any, token: str) -> Any:
        reviews.append(token)
        await asyncio.sleep(0)
        return "reviewed"

    monkeypatch.setattr(server_module, "review_token", fake_review_token)
    monkeypatch.setattr(server_module, "caller_from_review", lambda status: CALLER)
    return reviews


def test_one_token_review_serves_repeated_reports(reviewed: list[str]) -> None:
    async def scenario() -> list[int]:
        probe = ProgressEndpoint(None, Sink(), (0,))
        return [(await probe.handle(request())).status for _ in range(3)]

    assert asyncio.run(scenario()) == [202, 202, 202]
    assert reviewed == ["t"]


def test_a_pod_beyond_its_rate_gets_429_with_retry_after(reviewed: list[str]) -> None:
    async def scenario() -> list[web.Response]:
        probe = ProgressEndpoint(None, Sink(), (0,), limits=EndpointLimits(pod_rate=0.5, pod_burst=2))
        return [await probe.handle(request()) for _ in range(3)]

    answers = asyncio.run(scenario())
    assert [a.status for a in answers] == [202, 202, 429]
    assert answers[2].headers["Retry-After"] == "2"


def test_an_address_beyond_its_rate_is_refused_before_any_review(reviewed: list[str]) -> None:
    async def scenario() -> list[int]:
        probe = ProgressEndpoint(None, Sink(), (0,), limits=EndpointLimits(address_rate=1, address_burst=1))
        return [(await probe.handle(request(token=f"t{i}"))).status for i in range(2)]

    assert asyncio.run(scenario()) == [202, 429]
    assert reviewed == ["t0"]


def test_requests_beyond_the_in_flight_cap_get_503(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = asyncio.Event()

    async def slow_review(api: Any, token: str) -> Any:
        await gate.wait()
        raise ReportError(401, "token rejected")

    monkeypatch.setattr(server_module, "review_token", slow_review)

    async def scenario() -> tuple[int, str, int]:
        probe = ProgressEndpoint(None, Sink(), (0,), limits=EndpointLimits(max_in_flight=1))
        first = asyncio.create_task(probe.handle(request(token="a")))
        await asyncio.sleep(0.01)
        second = await probe.handle(request(token="b"))
        gate.set()
        return second.status, second.headers.get("Retry-After", ""), (await first).status

    assert asyncio.run(scenario()) == (503, "1", 401)


async def _serve_guarded(max_connections: int, lifetime: float) -> tuple[asyncio.AbstractServer, int]:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    guard = ConnectionGuard(runner.server, max_connections, lifetime)
    server = await asyncio.get_running_loop().create_server(guard, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_connections_beyond_the_cap_are_dropped_and_every_one_is_cut_after_its_lifetime() -> None:
    async def scenario() -> tuple[bytes, bytes, float, bytes, bytes, float]:
        server, port = await _serve_guarded(max_connections=1, lifetime=0.5)
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            # Writers are kept referenced: a collected StreamWriter closes its connection from the client side.
            idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)  # a slowloris: no bytes
            extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", port)
            dropped = await asyncio.wait_for(extra_reader.read(), 5)  # over the cap: closed at once, nothing served
            idle = await asyncio.wait_for(idle_reader.read(), 5)
            lived = loop.time() - started
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            served = await asyncio.wait_for(reader.read(), 5)
            writer.close()
            await writer.wait_closed()
            await asyncio.sleep(0.05)  # let the server see that connection go, so the next one is admitted
            started = loop.time()
            slow_reader, slow_writer = await asyncio.open_connection("127.0.0.1", port)
            slow_writer.write(b"GET / HTTP/1.1\r\nHo")  # and never the rest
            cut = await asyncio.wait_for(slow_reader.read(), 5)
            slow_lived = loop.time() - started
            for each in (idle_writer, extra_writer, slow_writer):
                each.close()
            return dropped, idle, lived, served, cut, slow_lived
        finally:
            server.close()

    dropped, idle, lived, served, cut, slow_lived = asyncio.run(scenario())
    assert dropped == b"" and idle == b"" and cut == b""
    assert lived >= 0.45 and slow_lived >= 0.45, "cut at the end of their lifetime, not before"
    assert served.startswith(b"HTTP/1.1 200") and served.endswith(b"hi")


def test_one_address_cannot_take_every_connection() -> None:
    """260 idle TLS connections from one pod used to take all 256 slots (issue 41)."""
    guard = ConnectionGuard(lambda: asyncio.Protocol(), max_connections=3, lifetime=1.0, per_address=2)
    assert [guard.admit("10.0.0.5") for _ in range(3)] == [True, True, False]
    assert guard.admit("10.0.0.6") is True, "another client still gets in"
    assert guard.admit("10.0.0.7") is False, "the global cap holds too"
    guard.release("10.0.0.5")
    assert guard.admit("10.0.0.7") is True
    for address in ("10.0.0.5", "10.0.0.6", "10.0.0.7"):
        guard.release(address)
    assert (guard.open, guard.by_address) == (0, {}), "nothing is kept for addresses with no connection"


def test_connections_past_the_per_address_bound_are_dropped_on_real_sockets() -> None:
    async def scenario() -> tuple[bytes, bytes]:
        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="hi")

        app = web.Application()
        app.router.add_get("/", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        guard = ConnectionGuard(runner.server, max_connections=10, lifetime=5.0, per_address=1)
        server = await asyncio.get_running_loop().create_server(guard, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            _, held = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.1", 0))
            extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.1", 0))
            dropped = await asyncio.wait_for(extra_reader.read(), 5)
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            served = await asyncio.wait_for(reader.read(), 5)
            for each in (held, extra_writer, writer):
                each.close()
            return dropped, served
        finally:
            server.close()
            await runner.cleanup()

    dropped, served = asyncio.run(scenario())
    assert dropped == b"" and served.startswith(b"HTTP/1.1 200")
