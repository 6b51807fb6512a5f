"""Probes run by the local process node as the kubelet runs them: a readiness probe (httpGet) gates the pod's Ready
condition and its Service's EndpointSlice both ways, a failing liveness probe (exec, inside the container) has the
container killed and restarted with the kubelet's events, and a startup probe (tcpSocket) holds `started` back."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest

from tests.kube import Kube, wait_until
from tests.local_node import endpoint_ready, local_pod, pod_status, python_container, wait_for_phase

pytestmark = pytest.mark.integration

PORT = 8080
# Answers /ready with 200 only after a POST /ready (and 503 again after a POST /unready): readiness under the test's
# control, from the host, through the pod's IP.
TOGGLE_SERVER = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
ready = False
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if ready else 503)
        self.end_headers()
    def do_POST(self):
        global ready
        ready = self.path == "/ready"
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
"""
# Alive while /tmp/alive exists (the container's own /tmp): removes it after 3 s, so the exec probe starts failing.
FADING = """
import os, pathlib, time
pathlib.Path("/tmp/alive").write_text("yes")
print("attempt started", flush=True)
time.sleep(3)
os.remove("/tmp/alive")
time.sleep(600)
"""
# Listens on the probed port only once the test has knocked on port 8081: started stays False until then.
SLOW_LISTENER = """
import socket
socket.create_server(("0.0.0.0", 8081)).accept()
server = socket.create_server(("0.0.0.0", 8080))
while True:
    server.accept()[0].close()
"""


def condition(status: dict[str, Any], kind: str) -> str | None:
    return next((c["status"] for c in status.get("conditions") or [] if c["type"] == kind), None)


def post(ip: str, path: str) -> bool:
    """True once the server took it (it may not listen yet just after its container started)."""
    try:
        urllib.request.urlopen(urllib.request.Request(f"http://{ip}:{PORT}{path}", b"", method="POST"), timeout=5)
    except OSError:
        return False
    return True


def test_a_readiness_probe_gates_ready_and_the_services_endpoints_both_ways(kube: Kube, namespace: str) -> None:
    container = python_container(
        TOGGLE_SERVER,
        ports=[{"name": "http", "containerPort": PORT}],
        readinessProbe={"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1},
    )
    pod = local_pod("toggle", container)
    pod["metadata"]["labels"] = {"app": "toggle"}
    kube.core.create_namespaced_pod(namespace, pod)
    service = {
        "metadata": {"name": "toggle"},
        "spec": {"selector": {"app": "toggle"}, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    kube.core.create_namespaced_service(namespace, service)
    status = wait_for_phase(kube, namespace, "toggle", ("Running",))
    wait_until(lambda: endpoint_ready(kube, namespace, "toggle") is False, 60, "a not-ready endpoint")
    status = pod_status(kube, namespace, "toggle")
    assert condition(status, "Ready") == "False" and status["containerStatuses"][0]["ready"] is False

    wait_until(lambda: post(status["podIP"], "/ready"), 60, "the server to take the POST")
    wait_until(lambda: endpoint_ready(kube, namespace, "toggle") is True, 60, "the endpoint to become ready")
    assert condition(pod_status(kube, namespace, "toggle"), "Ready") == "True"

    assert post(status["podIP"], "/unready")
    wait_until(lambda: endpoint_ready(kube, namespace, "toggle") is False, 60, "the endpoint to turn not ready")
    status = pod_status(kube, namespace, "toggle")
    assert condition(status, "Ready") == "False" and status["phase"] == "Running"
    messages = event_messages(kube, namespace, "toggle", "Unhealthy")
    assert "Readiness probe failed: HTTP probe failed with statuscode: 503" in messages, messages


def knock(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=5).close()
    except OSError:
        return False
    return True


def event_messages(kube: Kube, namespace: str, pod: str, reason: str) -> list[str]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}").items
    return [e.message for e in events if e.reason == reason]


def test_a_failing_liveness_probe_restarts_the_container_as_the_kubelet_does(kube: Kube, namespace: str) -> None:
    container = python_container(
        FADING,
        livenessProbe={
            "exec": {"command": ["cat", "/tmp/alive"]},
            "periodSeconds": 1,
            "failureThreshold": 2,
            "terminationGracePeriodSeconds": 1,
        },
    )
    kube.core.create_namespaced_pod(namespace, local_pod("fading", container, restartPolicy="Always"))

    def restarted() -> dict[str, Any] | None:
        entry = (pod_status(kube, namespace, "fading").get("containerStatuses") or [{}])[0]
        return entry if entry.get("restartCount", 0) >= 1 else None

    entry = wait_until(restarted, 120, "the container to be restarted by its liveness probe")
    assert entry["lastState"]["terminated"]["exitCode"] in (137, 143), entry
    unhealthy = event_messages(kube, namespace, "fading", "Unhealthy")
    assert any(m.startswith("Liveness probe failed: cat: /tmp/alive: No such file or directory") for m in unhealthy)
    assert "Container main failed liveness probe, will be restarted" in event_messages(
        kube, namespace, "fading", "Killing"
    )


def test_a_startup_probe_holds_started_and_ready_back_until_it_succeeds(kube: Kube, namespace: str) -> None:
    container = python_container(
        SLOW_LISTENER, startupProbe={"tcpSocket": {"port": PORT}, "periodSeconds": 1, "failureThreshold": 30}
    )
    kube.core.create_namespaced_pod(namespace, local_pod("slow", container))
    status = wait_for_phase(kube, namespace, "slow", ("Running",))
    early = status["containerStatuses"][0]
    assert (early["started"], early["ready"]) == (False, False), json.dumps(early)
    wait_until(lambda: knock(status["podIP"], 8081), 60, "the container to listen for the knock")

    def started() -> bool:
        entry = pod_status(kube, namespace, "slow")["containerStatuses"][0]
        return entry["started"] and entry["ready"]

    wait_until(started, 60, "the startup probe to succeed")
    assert pod_status(kube, namespace, "slow")["containerStatuses"][0]["restartCount"] == 0
