"""The real operator's webhook port against slow and greedy clients (issue 41), with the real API server calling it.

Measured before the fix (the server on local sockets, /tmp measurements in docs/reliability.md): half-sent headers
were held past 40 s (aiohttp's keep-alive default is 3630 s) and 1,500 silent connections from five addresses were
all still open 13 s later. A 30 s cut of idle connections was tried in an earlier session and undone (the API
server re-opened connections and converted more per write), so what must hold is both: a slowloris is cut, and the
API server's conversions go on, over connections it keeps, while a crowd of silent connections is kept up.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time

import pytest

from tests.jobs import create_job, job_manifest, wait_phase
from tests.kube import Kube
from tests.metrics import scrape, value
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k
from trainingjob.webhooks.connections import ConnectionLimits

pytestmark = pytest.mark.integration
INSECURE = ssl._create_unverified_context()  # the attacker does not care who serves
MARGIN = 30  # seconds a cut-off may take beyond its bound on a loaded 2-core machine
ATTACKERS = [f"127.0.0.{n}" for n in range(10, 30)]  # pods; the API server calls from 127.0.0.1


def tls_connection(port: int, source: str) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=MARGIN, source_address=(source, 0))
    return INSECURE.wrap_socket(raw, server_hostname="127.0.0.1")


def seconds_held(port: int, data: bytes, longest: float) -> float:
    """How long the server keeps a connection that sent `data` and nothing more (`longest` at most)."""
    with tls_connection(port, ATTACKERS[0]) as sock:
        sock.settimeout(longest)
        started = time.monotonic()
        sock.sendall(data)
        with contextlib.suppress(OSError):
            while sock.recv(4096):
                pass
        return time.monotonic() - started


class Crowd:
    """Keeps opening TLS connections that never send a byte, from many addresses, as fast as it can, holding up to
    `size` of them (closing its own oldest past that): a port full of half-open connections, kept full."""

    def __init__(self, port: int, size: int) -> None:
        self.port, self.size = port, size
        self.held: list[ssl.SSLSocket] = []
        self.opened = self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.held.append(tls_connection(self.port, ATTACKERS[self.opened % len(ATTACKERS)]))
                self.opened += 1
            except OSError:
                self.failed += 1
            while len(self.held) > self.size:
                self.held.pop(0).close()

    def __enter__(self) -> Crowd:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(60)
        for sock in self.held:
            sock.close()


def test_a_slowloris_is_cut_and_the_api_server_converts_beside_a_crowd(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    limits = ConnectionLimits()
    half = b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Le"
    held = seconds_held(operator.webhook_port, half, longest=limits.header_seconds + MARGIN + 10)
    assert held < limits.header_seconds + MARGIN, f"half-sent headers held {held:.0f} s (was 3630 s)"
    create_job(kube, namespace, job_manifest("beside", workers=1, complete_after=None))  # v1alpha1: converted
    wait_phase(kube, namespace, "beside", "Running")
    before = value(scrape(operator), "trainingjob_converted_objects_total")
    with Crowd(operator.webhook_port, limits.max_connections + 100) as crowd:
        while crowd.opened < limits.max_connections and crowd.thread.is_alive():
            time.sleep(0.2)
        started = time.monotonic()
        for i in range(10):  # each write of a job its creator wrote in v1alpha1 costs conversions
            patch = {"metadata": {"labels": {"touched": str(i)}}}
            kube.custom.patch_namespaced_custom_object(k.GROUP, k.V1, namespace, k.PLURAL, "beside", patch)
            read = kube.custom.get_namespaced_custom_object(k.GROUP, k.V1ALPHA1, namespace, k.PLURAL, "beside")
            assert read["apiVersion"].endswith(k.V1ALPHA1) and read["metadata"]["labels"]["touched"] == str(i)
        took, opened = time.monotonic() - started, crowd.opened
    converted = value(scrape(operator), "trainingjob_converted_objects_total") - before
    print(f"\nhalf-sent headers held {held:.1f} s; 10 writes + reads in v1alpha1 took {took:.1f} s beside a crowd of")
    print(
        f"{opened} silent connections from {len(ATTACKERS)} addresses ({crowd.failed} refused);",
        f"{converted:.0f} conversions",
    )
    assert converted >= 10, "the API server's conversions reached the operator while the crowd held the port"
    closed = {
        reason: value(scrape(operator), "trainingjob_webhook_connections_closed_total", reason=reason)
        for reason in ("slow_headers", "shed")
    }
    print(f"connections closed by the webhook port's bounds: {closed}")
    assert closed["slow_headers"] >= 1 and closed["shed"] >= 1, closed
