"""Who may use `tj ui`: it acts with its user's credentials, so only the token holder, only under the Host it
serves, and writes only with the header a cross-site form cannot send. Plain HTTP, no browser needed."""

from __future__ import annotations

import http.client
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.ui_support import RunningUi, Worker0, start_ui
from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import wait_until

pytestmark = pytest.mark.integration


def test_the_api_needs_the_token(admin_ui: RunningUi) -> None:
    status, body = admin_ui.request("/api/whoami", headers={"Authorization": "Bearer wrong"})
    assert status == 401 and "token" in body["message"]
    status, body = admin_ui.request("/api/whoami")
    assert status == 200 and body["server"].startswith("https://127.0.0.1:")
    assert body["user"]  # who the API server says the kubeconfig's user is


def test_the_token_is_never_a_cookie(admin_ui: RunningUi) -> None:
    """Cookies are not separated by port: one set for 127.0.0.1 reaches every local service (issue 41). An old
    login URL is sent on to the fragment form, and the cookie earlier versions set is deleted, not honoured."""
    connection = http.client.HTTPConnection("127.0.0.1", admin_ui.port, timeout=10)
    connection.request("GET", f"/?token={admin_ui.token}")
    response = connection.getresponse()
    assert response.status == 302 and response.getheader("Location") == f"/#token={admin_ui.token}"
    assert "Max-Age=0" in (response.getheader("Set-Cookie") or ""), "the old cookie is deleted"
    cookie_only = {"Authorization": "", "Cookie": f"tj_ui_token={admin_ui.token}"}
    assert admin_ui.request("/api/whoami", headers=cookie_only)[0] == 401, "a cookie alone lets no one in"


def test_a_foreign_host_header_is_refused(admin_ui: RunningUi) -> None:
    """A page on attacker.example resolving to 127.0.0.1 (DNS rebinding) gets nothing."""
    connection = http.client.HTTPConnection("127.0.0.1", admin_ui.port, timeout=10)
    connection.request("GET", "/api/whoami", headers={"Host": "attacker.example", "Authorization": "x"})
    assert connection.getresponse().status == 421


def test_writes_need_the_ui_header(admin_ui: RunningUi, kube: Any, namespace: str) -> None:
    manifest = job_manifest("csrf")
    manifest["metadata"]["namespace"] = namespace
    status, body = admin_ui.request("/api/trainingjobs", "POST", body={"manifest": json.dumps(manifest)})
    assert (status, body["message"]) == (403, "missing X-TJ-UI header")
    assert get_job(kube, namespace, "csrf") is None
    status, body = admin_ui.request(
        "/api/trainingjobs", "POST", headers={"X-TJ-UI": "1"}, body={"manifest": json.dumps(manifest)}
    )
    assert status == 200 and body["metadata"]["name"] == "csrf"


def test_the_page_and_its_libraries_are_served(admin_ui: RunningUi) -> None:
    for path, kind in [("/", "text/html"), ("/static/vendor/chart.umd.min.js", "javascript")]:
        with urllib.request.urlopen(admin_ui.base + path, timeout=10) as response:
            assert kind in response.headers["Content-Type"]
            assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")


def first_event(ui: RunningUi, path: str, event: str) -> Any:
    """The data of the first `event` on an SSE stream of the UI server."""
    request = urllib.request.Request(ui.base + path, headers={"Authorization": f"Bearer {ui.token}"})
    with urllib.request.urlopen(request, timeout=30) as stream:
        current = None
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                current = line.removeprefix("event: ")
            elif line.startswith("data: ") and current == event:
                return json.loads(line.removeprefix("data: "))
    raise AssertionError(f"no {event} event on {path}")


def test_recorded_curves_survive_a_restart_of_the_ui(
    cluster: Any, kube: Any, namespace: str, operator: Any, tmp_path: Path
) -> None:
    """The history file is what a restarted `tj ui` shows; the API itself keeps only the latest progress."""
    create_job(kube, namespace, job_manifest("again", complete_after=None))
    wait_phase(kube, namespace, "again", "Running")
    first = start_ui(cluster.kubeconfig, tmp_path)
    worker = Worker0(cluster.kubeconfig, namespace, "again")
    try:
        uid = get_job(kube, namespace, "again")["metadata"]["uid"]
        history_file = tmp_path / "history" / f"{uid}.jsonl"
        for epoch in (1, 2):
            worker.report(epoch, 4, loss=2.0 / epoch)
            wait_until(
                lambda epoch=epoch: history_file.is_file() and len(history_file.read_text().splitlines()) == epoch,
                45,
                f"the UI to record epoch {epoch}",
            )
    finally:
        worker.close()
        first.stop()
    second = start_ui(cluster.kubeconfig, tmp_path)
    try:
        points = first_event(second, f"/api/namespaces/{namespace}/trainingjobs/again/stream", "history")
    finally:
        second.stop()
    assert [(p["epoch"], p["metrics"]["loss"]) for p in points] == [(1, 2.0), (2, 1.0)]
