"""Every network endpoint of the real operator and of `tj ui`, attacked as a hostile worker, tenant or browser would
(issue 41): hostile paths, text meant for a terminal, oversized headers and bodies, deep JSON, slow and greedy
connections. Each is refused with a clear status, the operator stays healthy, and a normal job still runs.

What is already covered elsewhere and not repeated: wrong, expired, other-job and other-worker tokens and bodies
past the schema (test_progress_endpoint.py, test_progress_abuse.py), rate limits and slow TLS clients of the progress
endpoint (test_progress_limits.py), big and malformed webhook bodies and callers that are not the API server
(test_webhook_abuse.py), the UI's token, Host and cross-site checks (test_ui_server.py, test_ui_token.py).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.request

import pytest

from tests.integration import test_progress_endpoint as endpoint_tests
from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.integration.ui_support import RunningUi
from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.operator.http import PortLimits

pytestmark = pytest.mark.integration
running_job = endpoint_tests.running_job  # the fixture: a 2-worker job Running, its progress endpoint ready
MARGIN = 30  # seconds a cut-off may take beyond its bound on a loaded 2-core machine
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52: some terminals put `rm -rf ~` on the clipboard
INSECURE = ssl._create_unverified_context()  # the attacker does not care who serves


def raw_answer(host: str, port: int, data: bytes, tls: bool = False, source: str = "127.0.0.1") -> bytes:
    """What the server sends back to `data` before it closes (b"" when it closes unanswered)."""
    with socket.create_connection((host, port), timeout=MARGIN, source_address=(source, 0)) as raw:
        try:
            sock = INSECURE.wrap_socket(raw, server_hostname=host) if tls else raw
            sock.sendall(data)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)
        except (ConnectionError, ssl.SSLError):
            return b""  # closed unanswered


def seconds_held(host: str, port: int, data: bytes, tls: bool = False) -> float:
    """How long the server keeps a connection that sent `data` (half a request) and nothing more."""
    started = time.monotonic()
    raw_answer(host, port, data, tls)
    return time.monotonic() - started


def test_the_progress_endpoint_refuses_hostile_paths_and_terminal_text(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    escaped = {"epoch": 1, "checkpoint": {"path": f"/ckpt/{CLIPBOARD}"}}
    status, answer = post(operator, context, namespace, running_job, token, json.dumps(escaped).encode())
    assert (status, answer["reason"]) == (400, "checkpoint path holds control characters"), answer
    for name in ("..%2F..%2Fsecrets", "x%0A2026-11-29%20INFO%20FORGED%20line", "a" * 4000):
        status, answer = post(operator, context, namespace, name, "not-a-token", b'{"epoch": 1}')  # 401 was logged
        assert status == 404 and len(answer["reason"]) < 80 and "FORGED" not in answer["reason"], (name, answer)
    assert "FORGED" not in operator.log_path.read_text(errors="replace"), "a path never reaches the log"
    header = {"epoch": 1}
    big = f"POST /v1/namespaces/{namespace}/trainingjobs/{running_job}/progress HTTP/1.1\r\nHost: x\r\n"
    big += f"Authorization: Bearer {'t' * 20_000}\r\nContent-Length: 12\r\n\r\n{json.dumps(header)}"
    answer_bytes = raw_answer(operator.progress_host, operator.progress_port, big.encode(), tls=True)
    assert answer_bytes.split(b" ")[1] in (b"400", b"431"), answer_bytes[:100]
    assert not (get_job(kube, namespace, running_job) or {}).get("status", {}).get("lastCheckpoint")
    good = {"epoch": 2, "totalEpochs": 4, "checkpoint": {"path": "/ckpt/epoch-2"}}
    assert post(operator, context, namespace, running_job, token, json.dumps(good).encode())[0] == 202
    wait_until(
        lambda: ((get_job(kube, namespace, running_job) or {}).get("status") or {}).get("lastCheckpoint"),
        60,
        "the good report's checkpoint in status: the endpoint kept working",
    )


def test_the_metrics_and_probes_port_bounds_slow_and_greedy_clients(operator: RunningOperator) -> None:
    """Every pod may reach this port; the kubelet's liveness probe comes to it from another address."""
    limits, port = PortLimits(), operator.metrics_port
    held = [
        socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.2", 0))
        for _ in range(limits.per_address)
    ]
    try:
        probe = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        assert raw_answer("127.0.0.1", port, probe, source="127.0.0.2") == b"", "one address past its bound"
        assert raw_answer("127.0.0.1", port, probe).startswith(b"HTTP/1.1 200"), "the probe still gets in"
    finally:
        for each in held:
            each.close()
    held_for = seconds_held("127.0.0.1", port, b"GET /metrics HTTP/1.1\r\nHo")
    assert held_for < limits.idle_seconds + MARGIN, "half a request is cut (it was kept 3630 s)"
    huge = raw_answer("127.0.0.1", port, b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n")
    assert huge.split(b" ")[1] in (b"400", b"431"), huge[:100]
    with urllib.request.urlopen(f"{operator.metrics_url}/healthz", timeout=10) as answer:
        assert answer.status == 200


def test_the_webhook_port_refuses_oversized_headers(operator: RunningOperator) -> None:
    big = b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    huge = raw_answer("127.0.0.1", operator.webhook_port, big, tls=True)
    assert huge.split(b" ")[1] in (b"400", b"431"), huge[:100]
    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    assert raw_answer("127.0.0.1", operator.webhook_port, health, tls=True).startswith(b"HTTP/1.1 200")


def _ui(admin_ui: RunningUi, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", admin_ui.port, timeout=30)
    headers = {"Authorization": f"Bearer {admin_ui.token}", "X-TJ-UI": "1", "Content-Type": "application/json"}
    try:
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(4096) if response.status != 200 else b""
    except ConnectionError:
        return 0, b""  # refused before the whole body was sent
    finally:
        connection.close()


def test_the_ui_refuses_what_no_page_sends(admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("kept", complete_after=None))
    job = f"/api/namespaces/{namespace}/trainingjobs/kept"
    deep = b'{"suspend": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    status, text = _ui(admin_ui, "POST", f"{job}/suspend", deep)
    assert status == 400 and b"nests deeper" in text, (status, text)  # was 500 (RecursionError)
    status, _ = _ui(admin_ui, "POST", f"{job}/scale", b'{"workers": 2, "x": "' + b"a" * 2 * 1024 * 1024 + b'"}')
    assert status in (413, 0), status
    status, text = _ui(admin_ui, "POST", f"{job}/suspend", b"suspend=true")
    assert status == 400 and b"not JSON" in text, (status, text)
    for path in (
        f"/api/namespaces/{namespace}/trainingjobs/..%2F..%2F..%2Fapi%2Fv1%2Fnamespaces%2Fkube-system",
        "/api/namespaces/..%2Fkube-system/trainingjobs/kept",
        f"/api/namespaces/{namespace}/pods/x%0D%0AInjected:%201/log",
    ):
        status, text = _ui(admin_ui, "DELETE" if "/log" not in path else "GET", path)
        assert status == 400 and b"is not a valid" in text, (path, status, text)
    assert _ui(admin_ui, "GET", f"/api/namespaces/{namespace}/pods/none/log?tailLines=%C2%B2&follow=0")[0] == 200
    assert get_job(kube, namespace, "kept") is not None and not get_job(kube, namespace, "kept")["spec"].get("suspend")
    assert admin_ui.request("/api/whoami")[0] == 200


def test_after_all_of_it_a_normal_job_still_runs(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    create_job(kube, namespace, job_manifest("normal"))
    wait_phase(kube, namespace, "normal", "Succeeded", timeout=120)
    with urllib.request.urlopen(f"{operator.metrics_url}/healthz", timeout=10) as answer:
        assert answer.status == 200
