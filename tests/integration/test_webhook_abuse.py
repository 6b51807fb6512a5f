"""The real operator's webhook port under the attacks of issue 41, finding 1, measured: a 250 MiB POST, four big
conversions at once, /healthz while a big list converts, callers that are not the API server, malformed bodies.

Figures (RSS, /healthz latency) are printed (`-s`) for docs/trainingjob.md; the assertions are on outcomes and on
bounds far from the measured values (RSS is the operator process's own, VmHWM its peak)."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.jobs import create_job, get_job, job_manifest
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
MIB = 1024 * 1024
INSECURE = ssl._create_unverified_context()  # the attacker does not care who serves; nor does this test


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) // 1024 for key in ("VmRSS", "VmHWM")}


def post(url: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, context=INSECURE, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def streamed_post(url: str, size: int) -> int:
    """A POST of `size` bytes whose Content-Length claims them all, sent for as long as the server reads: the
    status it answers, or 0 when it closed the connection before answering."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as raw:
        tls = INSECURE.wrap_socket(raw, server_hostname=host)
        tls.sendall(f"POST {w.CONVERT_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {size}\r\n\r\n".encode())
        chunk, sent = b" " * MIB, 0
        try:
            while sent < size:
                tls.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass
        try:
            answer = tls.recv(4096)
        except OSError:
            return 0
    return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1") else 0


def probe_seconds(url: str) -> float:
    """How long one GET of `url` took (the webhook server's /healthz: served by the operator's one event loop, on
    a port that stays the same across the session's operator restarts)."""
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=30, context=INSECURE) as answer:
        assert answer.status == 200
    return time.monotonic() - started


def big_review(megabytes: int) -> bytes:
    """A ConversionReview of real-looking v1alpha1 jobs, about `megabytes` MiB."""
    template = job_manifest("j", workers=4, hyperparameters={"lr": 0.001}, env=[{"name": "A", "value": "x" * 300}])
    one = len(json.dumps(template))
    objects = []
    for index in range(megabytes * MIB // one):
        objects.append({**template, "metadata": {"name": f"j{index}", "namespace": "team", "uid": f"u{index}"}})
    request = {"uid": "big", "desiredAPIVersion": f"{c.GROUP}/{c.V1}", "objects": objects}
    return json.dumps(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}
    ).encode()


def test_a_250_mib_post_is_refused_before_it_is_read(operator: RunningOperator) -> None:
    pid = operator.process.pid
    before = memory(pid)
    url = f"{operator.webhook_url}{w.CONVERT_PATH}"
    status = streamed_post(url, 250 * MIB)
    after = memory(pid)
    print(f"\n250 MiB POST to /convert: answered {status}; operator RSS {before['VmRSS']} -> {after['VmRSS']} MiB")
    assert status in (413, 0), "refused (413), or cut off by the closed connection"
    assert after["VmRSS"] - before["VmRSS"] < 64, (before, after)


def test_big_conversions_at_once_stay_bounded_and_healthz_keeps_answering(operator: RunningOperator) -> None:
    """Four 14 MiB reviews at once: one at a time in the worker process (the others wait, or get 503 when the
    wait is over), never parsed in the operator's own; its liveness probe answers all along."""
    pid = operator.process.pid
    review = big_review(14)  # under the 16 MiB cap with its envelope
    before = memory(pid)
    statuses: list[int] = []

    def convert() -> None:
        headers = {"Content-Type": "application/json"}
        try:
            statuses.append(post(f"{operator.webhook_url}{w.CONVERT_PATH}", review, headers)[0])
        except OSError:
            statuses.append(0)  # refused (503) before its body was read: the connection closed under the sender

    senders = [threading.Thread(target=convert) for _ in range(4)]
    for sender in senders:
        sender.start()
    health = f"{operator.webhook_url}{w.HEALTH_PATH}"
    idle = [probe_seconds(health) for _ in range(20)]
    probes: list[float] = []
    while any(sender.is_alive() for sender in senders):
        probes.append(probe_seconds(health))
    for sender in senders:
        sender.join()
    after = memory(pid)
    probes.sort()
    idle.sort()
    print(f"\n/healthz idle: median {idle[10] * 1000:.0f} ms, max {idle[-1] * 1000:.0f} ms")
    print(
        f"\n4 x {len(review) / MIB:.0f} MiB conversions: {sorted(statuses)}; operator RSS {before['VmRSS']} -> "
        f"{after['VmRSS']} MiB (peak {after['VmHWM']} MiB); /healthz {len(probes)} probes, median "
        f"{probes[len(probes) // 2] * 1000:.0f} ms, max {probes[-1] * 1000:.0f} ms"
    )
    assert set(statuses) <= {200, 503, 0} and 200 in statuses, statuses
    assert len(probes) >= 2, "/healthz answered while the conversions ran"
    assert after["VmRSS"] - before["VmRSS"] < 150, "the operator's own process parsed none of them"


def test_only_the_api_server_may_call_admission(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    review = {"request": {"uid": "u", "operation": "CREATE", "namespace": namespace, "object": {"spec": {}}}}
    for path in (w.MUTATE_PATH, w.VALIDATE_PATH):
        status, text = post(f"{operator.webhook_url}{path}", json.dumps(review).encode())
        assert status == 401 and b"client certificate" in text, (path, status, text)
    # The API server itself still gets through: its mutating call adds the finalizer to a new job.
    create_job(kube, namespace, job_manifest("admitted", complete_after=None))
    job = wait_until(lambda: get_job(kube, namespace, "admitted"), 30, "the job")
    assert c.FINALIZER in job["metadata"].get("finalizers", []), "the mutating webhook ran for the API server"


@pytest.mark.parametrize(
    "body",
    [b"[" * 5000, b'{"request": {"uid": "u", "desiredAPIVersion": "x", "objects": "all"}}', b"\xff"],
    ids=["deep", "wrong-types", "not-utf8"],
)
def test_malformed_conversions_get_400(operator: RunningOperator, body: bytes) -> None:
    status, text = post(f"{operator.webhook_url}{w.CONVERT_PATH}", body)
    assert status == 400 and text, text
