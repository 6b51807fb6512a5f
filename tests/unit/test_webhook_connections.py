"""The webhook server's connections against slow and greedy clients, served for real (TLS, local sockets) by
WebhookServer.start (issue 41).

Measured before the fix: a client that sent half its headers and went silent was held for aiohttp's keep-alive
default (3630 s), and the port took any number of such connections. Now headers must end within
`header_seconds` of a request's first byte, an idle keep-alive connection between two requests is never timed
(the API server reuses them), and a full port sheds connections still waiting for their headers so a real
conversion gets in.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from tests.unit.test_webhook_metrics import conversion, job
from trainingjob import certs
from trainingjob.api import constants as c
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.connections import ConnectionLimits, RequestFramer
from trainingjob.webhooks.limits import ServerLimits
from trainingjob.webhooks.server import WebhookServer

T = TypeVar("T")
FAST = ConnectionLimits(
    header_seconds=0.5, handshake_seconds=2, max_connections=6, waiting_per_address=3, lost_seconds=1.5
)
CLIENT = ssl._create_unverified_context()
V1, V1ALPHA1 = f"{c.GROUP}/{c.V1}", f"{c.GROUP}/{c.V1ALPHA1}"


async def allow(_: AdmissionRequest) -> Verdict:
    return Verdict()


def convert_request(keep_alive: bool = True) -> bytes:
    body = json.dumps(conversion(V1, job(V1ALPHA1, "a"))).encode()
    head = f"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + ("" if keep_alive else "Connection: close\r\n") + "\r\n").encode() + body


def serving(
    limits: ConnectionLimits,
    scenario: Callable[[int, WebhookServer], Awaitable[T]],
    server_limits: ServerLimits | None = None,
    metrics: OperatorMetrics | None = None,
) -> T:
    async def run() -> T:
        ca = certs.new_ca("ca", datetime.timedelta(hours=1))
        leaf = certs.issue(
            ca, certs.Leaf("localhost", server=True, dns_names=("localhost",)), datetime.timedelta(hours=1)
        )
        server = WebhookServer(allow, allow, metrics, limits=server_limits, connections=limits)
        server.use(leaf)
        await server.start("127.0.0.1", 0)
        assert server.runner is not None
        try:
            return await scenario(server.runner.addresses[0][1], server)
        finally:
            await server.stop()

    return asyncio.run(run())


async def connect(port: int, source: str = "127.0.0.1") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=CLIENT, local_addr=(source, 0))


async def answer(reader: asyncio.StreamReader) -> bytes:
    """One HTTP response (status line, headers, Content-Length body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    return head + await asyncio.wait_for(reader.readexactly(length), 10)


async def held_for(port: int, data: bytes) -> float:
    """Seconds until the server closes a connection that sent `data` and nothing more (at most 10)."""
    loop = asyncio.get_running_loop()
    reader, writer = await connect(port)
    started = loop.time()
    writer.write(data)
    with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
        await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return loop.time() - started


def test_half_sent_headers_are_cut_but_idle_keep_alive_connections_are_kept() -> None:
    async def scenario(port: int, _: WebhookServer) -> tuple[float, float, float, bytes, bytes, bool]:
        half = await held_for(port, b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Le")
        silent = await held_for(port, b"")
        reader, writer = await connect(port)
        writer.write(convert_request())
        first = await answer(reader)
        await asyncio.sleep(FAST.header_seconds * 4)  # idle between two requests: the API server's reuse
        writer.write(convert_request())
        second = await answer(reader)
        writer.write(b"POST /convert HTTP/1.1\r\nHo")  # a third request that never ends its headers
        loop = asyncio.get_running_loop()
        started = loop.time()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await asyncio.wait_for(reader.read(), 10)
        third = loop.time() - started
        writer.close()
        return half, silent, third, first, second, True

    metrics = OperatorMetrics()
    half, silent, third, first, second, _ = serving(FAST, scenario, metrics=metrics)
    assert half < 5 and silent < 5 and third < 5, (half, silent, third)  # was 3630 s
    closed = metrics.registry.get_sample_value(
        "trainingjob_webhook_connections_closed_total", {"reason": "slow_headers"}
    )
    assert closed == 3, closed
    for each in (first, second):
        assert each.startswith(b"HTTP/1.1 200") and b'"result":{"status":"Success"}' in each, each[:300]


def test_a_body_sent_slowly_gets_408_and_the_connection_closes() -> None:
    async def scenario(port: int, _: WebhookServer) -> bytes:
        reader, writer = await connect(port)
        writer.write(b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")  # headers in time
        answered = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return answered

    answered = serving(FAST, scenario, ServerLimits(body_seconds=0.5))
    assert answered.startswith(b"HTTP/1.1 408") and b"did not arrive in time" in answered, answered[:200]


def test_a_chunked_request_is_answered_and_its_connection_closed() -> None:
    """The framer cannot follow a chunked body (the API server never sends one), so that connection must not stay
    open untimed after its answer."""

    async def scenario(port: int, _: WebhookServer) -> tuple[bytes, bytes]:
        body = convert_request().split(b"\r\n\r\n", 1)[1]
        reader, writer = await connect(port)
        head = b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        writer.write(head + b"\r\n" + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        answered = await answer(reader)
        rest = await asyncio.wait_for(reader.read(), 10)  # TimeoutError if the connection stayed open
        writer.close()
        return answered, rest

    answered, rest = serving(FAST, scenario)
    assert answered.startswith(b"HTTP/1.1 200") and b"Success" in answered, answered[:300]
    assert rest == b""


def test_idle_half_open_connections_do_not_starve_a_real_conversion() -> None:
    """A full port of connections that never send their headers, from several addresses: the API server's
    connection (another address) sheds one of them and is answered; one address holds at most its share."""

    async def scenario(port: int, server: WebhookServer) -> tuple[bytes, int, int]:
        held = [await connect(port, f"127.0.0.{2 + n % 3}") for n in range(FAST.max_connections * 2)]
        await asyncio.sleep(0.1)
        assert server.site is not None
        open_now = len(server.site.table.open)
        reader, writer = await connect(port, "127.0.0.9")
        writer.write(convert_request(keep_alive=False))
        answered = await answer(reader)
        writer.close()
        for _, each in held:
            each.close()
        counts = server.site.table.counts
        return answered, open_now, counts["shed"] + counts["shed_per_address"]

    answered, open_now, shed = serving(FAST, scenario)
    assert answered.startswith(b"HTTP/1.1 200") and b"Success" in answered, answered[:300]
    assert open_now <= FAST.max_connections and shed > FAST.max_connections, (open_now, shed)


def test_idle_keep_alive_connections_of_one_pod_do_not_keep_the_api_server_out() -> None:
    """Connections that finished a request and stay open are shed from the address holding the most."""

    async def scenario(port: int, _: WebhookServer) -> bytes:
        held = []
        for _ in range(FAST.max_connections):
            reader, writer = await connect(port, "127.0.0.2")
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await answer(reader)
            held.append(writer)
        reader, writer = await connect(port, "127.0.0.9")
        writer.write(convert_request(keep_alive=False))
        answered = await answer(reader)
        for each in [*held, writer]:
            each.close()
        return answered

    assert serving(FAST, scenario).startswith(b"HTTP/1.1 200")


def test_the_api_servers_burst_of_fresh_connections_is_not_shed_per_address_but_a_stale_one_is() -> None:
    """More fresh connections from one address than `waiting_per_address` (the API server under a creation burst,
    its headers unread behind a busy loop): none is shed, each is answered. Shedding the oldest fresh one failed a
    create at 5000 x 8 ("write: broken pipe": Go does not retry a POST). One that waited past
    `shed_waiting_after` is shed for the next newcomer, as a slowloris's is."""
    limits = dataclasses.replace(FAST, header_seconds=5, max_connections=20, shed_waiting_after=0.5)

    async def scenario(port: int, server: WebhookServer) -> tuple[list[bytes], int, int]:
        burst = [await connect(port, "127.0.0.9") for _ in range(limits.waiting_per_address * 2)]
        for _, writer in burst:
            writer.write(convert_request(keep_alive=False))
        answers = [await answer(reader) for reader, _ in burst]
        assert server.site is not None
        shed_in_burst = server.site.table.counts.total()
        silent = [await connect(port, "127.0.0.9") for _ in range(limits.waiting_per_address)]
        await asyncio.sleep(limits.shed_waiting_after + 0.2)
        newcomer = await connect(port, "127.0.0.9")
        await asyncio.sleep(0.1)
        for _, writer in [*burst, *silent, newcomer]:
            writer.close()
        return answers, shed_in_burst, server.site.table.counts["shed_per_address"]

    answers, shed_in_burst, shed = serving(limits, scenario)
    assert all(each.startswith(b"HTTP/1.1 200") for each in answers), [each[:40] for each in answers]
    assert (shed_in_burst, shed) == (0, 1)


def test_the_framer_follows_headers_bodies_and_pipelined_requests() -> None:
    framer = RequestFramer()
    assert framer.waiting, "a new connection waits for its first headers"
    framer.feed(b"POST /convert HTTP/1.1\r\nContent-Length: 7\r\n\r")
    assert framer.waiting
    framer.feed(b"\nab")
    assert not framer.waiting and framer.body_left == 5
    framer.feed(b"c\r\n\r\n")  # body bytes that look like a header end
    assert not framer.waiting and framer.requests == 1
    framer.feed(b"GET /healthz HTTP/1.1\r\n\r\nGET /h")
    assert framer.requests == 2 and framer.waiting
    framer.feed(b"ealthz HTTP/1.1\r\n\r\n")
    assert framer.requests == 3 and not framer.waiting
    chunked = RequestFramer()
    chunked.feed(b"POST /convert HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n")
    assert chunked.lost and not chunked.waiting
    huge = RequestFramer(max_header_bytes=100)
    huge.feed(b"GET / HTTP/1.1\r\nX: " + b"a" * 200)
    assert huge.lost


def test_a_caller_that_hangs_up_mid_body_is_counted_not_logged_as_an_error(caplog: pytest.LogCaptureFixture) -> None:
    """An API server killed while it sends a review (CI's control-plane chaos, seed 258665549): the body ends at
    the lost connection. Nobody is left to answer; it is counted as `abandoned`, and no error is logged (before
    the fix aiohttp logged 'Error handling request' with the ConnectionResetError from the body read)."""

    async def scenario(port: int, _: WebhookServer) -> None:
        _reader, writer = await connect(port)
        writer.write(convert_request()[:-20])
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()
        await asyncio.sleep(0.5)

    caplog.set_level(logging.DEBUG)
    metrics = OperatorMetrics()
    serving(FAST, scenario, metrics=metrics)
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert not errors, errors
    abandoned = metrics.registry.get_sample_value(
        "trainingjob_webhook_requests_total", {"webhook": "convert", "outcome": "abandoned"}
    )
    assert abandoned == 1, abandoned
