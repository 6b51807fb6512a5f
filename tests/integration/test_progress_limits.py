"""The progress endpoint of the real operator under abuse: a pod reporting too often gets 429 with Retry-After
(and is accepted again after it), repeated reports cost one TokenReview, and slow clients are cut off (a TLS
handshake that never comes, a connection that never sends a request, a body that never arrives).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import uuid

import pytest

from tests.integration import test_progress_endpoint as endpoint_tests
from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.kube import Kube, wait_until
from tests.metrics import scrape, value
from tests.operator_harness import RunningOperator
from trainingjob.progress.server import EndpointLimits

pytestmark = pytest.mark.integration
running_job = endpoint_tests.running_job  # the fixture: a 2-worker job Running, its progress endpoint ready
LIMITS = EndpointLimits()
# Seconds a cut-off may take beyond its limit on a loaded 2-core machine.
MARGIN = 30


def test_a_pod_reporting_too_often_gets_429_with_retry_after(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    answers = []
    for step in range(LIMITS.pod_burst + 5):
        body = json.dumps({"step": step, "totalSteps": 1000}).encode()
        answers.append(_post_with_headers(operator, context, namespace, running_job, token, body))
    statuses = [status for status, _ in answers]
    assert statuses[: LIMITS.pod_burst] == [202] * LIMITS.pod_burst, statuses
    refused = [headers for status, headers in answers if status == 429]
    assert refused, f"no 429 after {len(answers)} reports in a burst: {statuses}"
    pause = int(refused[0]["Retry-After"])
    assert 1 <= pause <= 60
    body = json.dumps({"step": 999, "totalSteps": 1000}).encode()
    wait_until(
        lambda: post(operator, context, namespace, running_job, token, body)[0] == 202,
        pause + MARGIN,
        "the report to be accepted once the pause is over",
        interval=pause,
    )


def _post_with_headers(
    operator: RunningOperator, context: ssl.SSLContext, namespace: str, job: str, token: str, body: bytes
) -> tuple[int, dict[str, str]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{operator.progress_url}/v1/namespaces/{namespace}/trainingjobs/{job}/progress",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_repeated_reports_cost_one_token_review(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    before = value(scrape(operator), "trainingjob_api_requests_total", resource="tokenreviews")
    for epoch in range(1, 6):
        body = json.dumps({"epoch": epoch, "totalEpochs": 10}).encode()
        assert post(operator, context, namespace, running_job, token, body)[0] == 202
    after = value(scrape(operator), "trainingjob_api_requests_total", resource="tokenreviews")
    assert after - before == 1
    garbage = f"not-a-token-{uuid.uuid4().hex}"  # the negative cache may remember a fixed one from other tests
    for _ in range(3):
        assert post(operator, context, namespace, running_job, garbage, b'{"epoch": 1}')[0] == 401
    assert value(scrape(operator), "trainingjob_api_requests_total", resource="tokenreviews") - after == 1


def _seconds_until_closed(sock: socket.socket | ssl.SSLSocket, limit: float) -> float:
    """How long the server keeps a connection that never completes a request (reading until EOF or reset)."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(1024):
            pass
    except (ConnectionResetError, ssl.SSLError):
        pass
    return time.monotonic() - started


def _connect(operator: RunningOperator) -> socket.socket:
    return socket.create_connection((operator.progress_host, operator.progress_port), timeout=10)


def _tls_connection(operator: RunningOperator) -> ssl.SSLSocket:
    """A TLS connection to the endpoint (its certificate is not what these tests are about)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context.wrap_socket(_connect(operator))


def test_a_client_that_never_shakes_hands_is_cut_off(operator: RunningOperator) -> None:
    with _connect(operator) as sock:
        held = _seconds_until_closed(sock, LIMITS.handshake_seconds + MARGIN)
    assert held < LIMITS.handshake_seconds + MARGIN


def test_a_connection_that_never_sends_a_whole_request_is_cut_off(operator: RunningOperator) -> None:
    with _tls_connection(operator) as sock:
        sock.sendall(b"POST /v1/namespaces/x/trainingjobs/y/progress HTTP/1.1\r\nHost: x\r\n")  # no end of headers
        held = _seconds_until_closed(sock, LIMITS.connection_seconds + MARGIN)
    assert held < LIMITS.connection_seconds + MARGIN


def test_a_body_that_never_arrives_gets_408(operator: RunningOperator) -> None:
    with _tls_connection(operator) as sock:
        head = (
            "POST /v1/namespaces/x/trainingjobs/y/progress HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        sock.sendall(head.encode())
        sock.settimeout(LIMITS.body_seconds + MARGIN)
        started = time.monotonic()
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert time.monotonic() - started >= LIMITS.body_seconds - 1
