"""The local process node's servers against slow and greedy clients, served for real on local sockets (issue 41).
Every worker on a node reaches them: the GPU exporter (plain HTTP, no authentication), the log endpoint (TLS with
a client certificate of the cluster CA) and the DNS server (UDP and TCP).

Measured before the bounds (aiohttp's and asyncio's defaults): the exporter held half a request past 40 s (aiohttp's
keep-alive default is 3630 s) and took any number of connections; the log port held a connection that never
started its TLS handshake 60 s; a DNS client that sent a TCP length and stopped was held for good."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.unit.test_node_logs_and_dns import cluster_records, query_bytes
from trainingjob import certs
from trainingjob.forwarding import PortLimits
from trainingjob.node.config import NodeConfig
from trainingjob.node.devices.exporter import GpuExporter
from trainingjob.node.devices.gpus import GpuInventory
from trainingjob.node.logs.logserver import LogServer
from trainingjob.node.network import dns

T = TypeVar("T")
FAST = PortLimits(idle_seconds=0.5, lifetime=5.0, max_connections=8, per_address=2, handshake_seconds=0.5)
GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


async def held_for(port: int, data: bytes, source: str = "127.0.0.1") -> float:
    """Seconds until the server closes a plain connection that sent `data` and nothing more (at most 10)."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    started = loop.time()
    writer.write(data)
    with contextlib.suppress(ConnectionError, TimeoutError):
        await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return loop.time() - started


async def exchange(port: int, data: bytes, source: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    except ConnectionError:
        return b""
    finally:
        writer.close()


def exporting(scenario: Callable[[int], Awaitable[T]]) -> T:
    async def run() -> T:
        exporter = GpuExporter(None, None, GpuInventory(), "node-a", "127.0.0.1", 0, FAST)  # type: ignore[arg-type]
        await exporter.start()
        assert exporter.runner is not None
        try:
            return await scenario(exporter.runner.addresses[0][1])
        finally:
            await exporter.stop()

    return asyncio.run(run())


def test_the_gpu_exporter_cuts_half_sent_requests_and_bounds_one_address() -> None:
    async def scenario(port: int) -> tuple[float, bytes, bytes]:
        half = await held_for(port, b"GET /metrics HTTP/1.1\r\nHo")
        held = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)) for _ in range(2)]
        extra = await exchange(port, GET, "127.0.0.2")
        scrape = await exchange(port, GET, "127.0.0.1")
        for _, writer in held:
            writer.close()
        return half, extra, scrape

    half, extra, scrape = exporting(scenario)
    assert half < 5, f"half a request held {half:.1f} s (was 3630 s)"
    assert extra == b"", "a third connection from one address is closed unanswered"
    assert scrape.startswith(b"HTTP/1.1 200"), scrape[:100]


def node_config(directory: Path) -> NodeConfig:
    ca = certs.new_ca("cluster", datetime.timedelta(hours=1))
    serving = certs.issue(ca, certs.Leaf("node-a", server=True, dns_names=("localhost",)), datetime.timedelta(hours=1))
    files = {"ca.crt": ca.cert_pem, "tls.crt": serving.cert_pem, "tls.key": serving.key_pem}
    for name, text in files.items():
        (directory / name).write_text(text)
    ca_file, cert, key = (str(directory / name) for name in files)
    return NodeConfig(
        *("node-a", 0, "c", str(directory), "https://127.0.0.1:1", ca_file, cert, key, cert, key, "127.0.0.1", 0),
        *("127.0.0.1", 1, str(directory / "images"), "v1.35.4", False),
    )


def test_the_log_port_cuts_a_stranger_who_never_finishes_the_handshake(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, float]:
        server = LogServer(node_config(tmp_path), None, lambda *_: (404, "none"), FAST)  # type: ignore[arg-type]
        await server.start("127.0.0.1")
        assert server.runner is not None
        port = server.runner.addresses[0][1]
        try:
            silent = await held_for(port, b"")
            garbage = await held_for(port, b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, no more
            return silent, garbage
        finally:
            await server.stop()

    silent, garbage = asyncio.run(scenario())
    assert silent < 5 and garbage < 5, f"held {silent:.1f} s and {garbage:.1f} s (was 60 s)"


def dns_serving(scenario: Callable[[dns.DnsServer, int], Awaitable[T]], upstream: str) -> T:
    async def run() -> T:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = dns.DnsServer(cluster_records(), "127.0.0.1", port)
        server.upstreams = [upstream]
        await server.start()
        try:
            return await scenario(server, port)
        finally:
            await server.stop()

    return asyncio.run(run())


def test_dns_over_tcp_cuts_a_half_sent_message_and_caps_connections(monkeypatch: Any) -> None:
    monkeypatch.setattr(dns, "TCP_MESSAGE_SECONDS", 0.5)
    monkeypatch.setattr(dns, "TCP_CONNECTIONS", 3)

    async def scenario(server: dns.DnsServer, port: int) -> tuple[float, bytes, bytes]:
        half = await held_for(port, struct.pack("!H", 100) + b"\x00\x01")
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await asyncio.sleep(0.1)
        extra = await exchange(port, b"", "127.0.0.1")
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.1)
        query = query_bytes("db.ns.svc.cluster.local")
        answered = await exchange(port, struct.pack("!H", len(query)) + query, "127.0.0.1")
        return half, extra, answered

    half, extra, answered = dns_serving(scenario, "127.0.0.1")
    assert half < 5, f"a TCP message begun and never finished held {half:.1f} s (was: for good)"
    assert extra == b"", "past the cap a connection is closed at once"
    assert len(answered) > 2 and answered[2:4] == query_bytes("db.ns.svc.cluster.local")[:2], answered


def test_dns_over_udp_answers_a_bounded_number_of_queries_at_once(monkeypatch: Any) -> None:
    """Queries forwarded to an upstream that never answers each wait FORWARD_TIMEOUT with a socket of their own:
    past UDP_IN_FLIGHT, new ones are dropped (before, each opened another socket)."""
    monkeypatch.setattr(dns, "UDP_IN_FLIGHT", 20)

    async def scenario(server: dns.DnsServer, port: int) -> tuple[int, int]:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            for n in range(60):
                client.sendto(query_bytes(f"name-{n}.example.org"), ("127.0.0.1", port))
            await asyncio.sleep(0.5)
            return len(server.replies), server.dropped

    in_flight, dropped = dns_serving(scenario, "127.0.0.3")  # nothing answers there: each waits its timeout
    assert in_flight <= 20 and dropped >= 40 - 5, (in_flight, dropped)
