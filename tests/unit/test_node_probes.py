"""Container probes on the local node: the kubelet's defaults and threshold rules (pure), and the httpGet and
tcpSocket handlers against real sockets on this machine. Probes run by the node against real pods (Ready, restarts,
EndpointSlices) are in tests/integration/test_local_node_probes.py."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from trainingjob.node.probes.handlers import http_get, tcp_socket
from trainingjob.node.probes.spec import (
    Handler,
    ProbeCounter,
    ProbeSpecError,
    container_probes,
    parse_probe,
)

CONTAINER = {"name": "server", "ports": [{"name": "http", "containerPort": 8080}]}


def test_defaults_are_the_kubelets() -> None:
    probe = parse_probe("liveness", {"tcpSocket": {"port": 80}}, CONTAINER)
    assert (probe.initial_delay, probe.period, probe.timeout) == (0, 10, 1)
    assert (probe.success_threshold, probe.failure_threshold, probe.termination_grace) == (1, 3, None)


def test_handlers_are_read_with_named_ports_headers_and_schemes() -> None:
    probes = container_probes(
        {
            **CONTAINER,
            "readinessProbe": {
                "httpGet": {
                    "path": "/ready",
                    "port": "http",
                    "scheme": "https",
                    "httpHeaders": [{"name": "X", "value": "1"}],
                },
                "successThreshold": 2,
                "periodSeconds": 2,
            },
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "terminationGracePeriodSeconds": 5},
            "startupProbe": {"tcpSocket": {"port": "8080"}, "failureThreshold": 30},
        }
    )
    assert probes["readiness"].handler == Handler("httpGet", 8080, "", "/ready", "HTTPS", (("X", "1"),))
    assert (probes["readiness"].success_threshold, probes["readiness"].period) == (2, 2)
    assert probes["liveness"].handler == Handler("exec", command=("cat", "/tmp/alive"))
    assert probes["liveness"].termination_grace == 5
    assert (probes["startup"].handler.port, probes["startup"].failure_threshold) == (8080, 30)


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        ({"httpGet": {"port": "metrics"}}, "no port named 'metrics'"),
        ({"grpc": {"port": 9000}}, "grpc probes are not supported"),
        ({"periodSeconds": 3}, "no handler"),
    ],
)
def test_a_probe_the_node_cannot_run_says_why(probe: dict, message: str) -> None:
    with pytest.raises(ProbeSpecError, match=message):
        container_probes({**CONTAINER, "livenessProbe": probe})


def results(kind: str, runs: list[bool], **thresholds: int) -> list[bool | None]:
    counter = ProbeCounter.start(parse_probe(kind, {"tcpSocket": {"port": 1}, **thresholds}, CONTAINER))
    seen = []
    for ok in runs:
        counter.record(ok)
        seen.append(counter.result)
    return seen


def test_readiness_starts_failed_and_needs_its_success_threshold() -> None:
    assert ProbeCounter.start(parse_probe("readiness", {"tcpSocket": {"port": 1}}, CONTAINER)).result is False
    runs = [True, True, False, True, True, True]
    assert results("readiness", runs, successThreshold=2, failureThreshold=2) == [
        False,
        True,
        True,  # one failure is below the failure threshold
        True,
        True,
        True,
    ]


def test_liveness_fails_only_after_its_failure_threshold_in_a_row() -> None:
    runs = [False, False, True, False, False, False]
    assert results("liveness", runs) == [True, True, True, True, True, False]


def test_startup_is_undecided_until_it_succeeds_or_exhausts_its_failures() -> None:
    assert results("startup", [False, True]) == [None, True]
    assert results("startup", [False, False], failureThreshold=2) == [None, False]


def test_liveness_and_startup_always_use_one_success() -> None:
    assert parse_probe("liveness", {"tcpSocket": {"port": 1}, "successThreshold": 3}, CONTAINER).success_threshold == 1


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = {"/ok": 200, "/moved": 302, "/down": 503}.get(self.path, 404)
        body = b"not ready yet" if code == 503 else b""
        self.send_response(code)
        self.send_header("X-Agent", self.headers.get("User-Agent", ""))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize(("path", "ok"), [("/ok", True), ("/moved", True), ("/down", False), ("/missing", False)])
def test_http_get_succeeds_from_200_to_399(health_server: int, path: str, ok: bool) -> None:
    handler = Handler("httpGet", health_server, path=path)
    result, message = asyncio.run(http_get(handler, "127.0.0.1", 5, "v1.35.4"))
    assert result is ok
    if path == "/down":
        assert message == "HTTP probe failed with statuscode: 503: not ready yet"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_reads_like_the_kubelets_message() -> None:
    port = free_port()
    ok, message = asyncio.run(http_get(Handler("httpGet", port, path="/healthz"), "127.0.0.1", 5, "v1.35.4"))
    assert not ok
    assert message == f'Get "http://127.0.0.1:{port}/healthz": dial tcp 127.0.0.1:{port}: connect: connection refused'
    ok, message = asyncio.run(tcp_socket(Handler("tcpSocket", port), "127.0.0.1", 5))
    assert (ok, message) == (False, f"dial tcp 127.0.0.1:{port}: connect: connection refused")


def test_tcp_socket_succeeds_once_something_listens(health_server: int) -> None:
    assert asyncio.run(tcp_socket(Handler("tcpSocket", health_server), "127.0.0.1", 5)) == (True, "")
