"""The operator's plain-HTTP port (/metrics, /healthz, /readyz) against slow and greedy clients, served for real
on local sockets (issue 41).

Found by trying: aiohttp keeps a connection that never finishes its request for 3630 s (its keep-alive default)
and took any number of them on the metrics port, which every pod may reach and the kubelet's liveness probe uses
(900 half-sent requests from one address were all still held 20 s later). Now a request must arrive within the
idle bound, and the port takes a bounded number of connections per client address, so the probe (from another
address) still gets in.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest

from trainingjob.kube.meta import is_object_name
from trainingjob.operator.http import PortLimits, build_app, serve
from trainingjob.operator.metrics import OperatorMetrics

FAST = PortLimits(idle_seconds=0.5, lifetime=5.0, max_connections=8, per_address=2)
GET = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


async def _serving_metrics() -> tuple[object, int]:
    app = build_app(OperatorMetrics(), lambda: (True, "ok"), lambda: (True, "ready"))
    runner = await serve(app, "127.0.0.1", 0, FAST)
    return runner, runner.addresses[0][1]


async def _exchange(port: int, data: bytes, source: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0), ssl=tls)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    except ConnectionError:
        return b""  # closed unanswered
    finally:
        writer.close()


async def _held_for(port: int, data: bytes, tls: ssl.SSLContext | None = None) -> float:
    """Seconds until the server closes a connection that sent `data` and nothing more."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    writer.write(data)
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return loop.time() - started


def test_half_sent_requests_are_cut_and_whole_ones_answered() -> None:
    async def scenario() -> tuple[float, float, bytes, bytes]:
        runner, port = await _serving_metrics()
        try:
            headers = await _held_for(port, b"GET /healthz HTTP/1.1\r\nHo")  # and never the rest
            silent = await _held_for(port, b"")
            huge = await _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
            return headers, silent, huge, await _exchange(port, GET)
        finally:
            await runner.cleanup()  # type: ignore[attr-defined]

    headers, silent, huge, answered = asyncio.run(scenario())
    assert 0.4 <= headers < 5 and 0.4 <= silent < 5, (headers, silent)
    assert huge.split(b" ")[1] in (b"400", b"431"), huge[:80]
    assert answered.startswith(b"HTTP/1.1 200") and answered.endswith(b"ok\n")


def test_one_address_cannot_take_the_probes_port() -> None:
    """A pod holding connections gets `per_address` of them; the kubelet, from another address, still probes."""

    async def scenario() -> tuple[list[bytes], bytes]:
        runner, port = await _serving_metrics()
        try:
            held = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)) for _ in range(2)]
            extra = await _exchange(port, GET, source="127.0.0.2")
            probe = await _exchange(port, GET, source="127.0.0.1")
            for _, writer in held:
                writer.close()
            return [extra], probe
        finally:
            await runner.cleanup()  # type: ignore[attr-defined]

    (extra,), probe = asyncio.run(scenario())
    assert extra == b"", "the third connection from one address is closed unanswered"
    assert probe.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("team-a", True),
        ("learner.v2", True),
        ("a" * 253, True),
        ("a" * 254, False),
        ("../../secrets", False),
        ("x\n2026 INFO forged", False),
        ("Upper", False),
        ("", False),
        ("-lead", False),
    ],
)
def test_names_taken_from_a_path_must_be_object_names(text: str, valid: bool) -> None:
    assert is_object_name(text) is valid
