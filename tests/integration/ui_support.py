"""`tj ui` under test: the server as a subprocess with a given kubeconfig, Debian's Chromium driven by Playwright,
a restricted user's kubeconfig, and a worker 0 that reports progress to the real operator's endpoint."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kube import Kube, token_kubeconfig, wait_until
from tests.operator_harness import REPO, free_port
from tests.prerequisites import missing_prerequisite

CHROMIUM = Path(os.environ.get("TJ_CHROMIUM", "/usr/bin/chromium"))
# What works on this machine's closed network (docs/ui.md): no background connections, no sandbox as root.
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# Longer than the operator's progress write interval plus a loaded machine's scheduling delays.
UI_TIMEOUT_MS = 45_000
SCREENSHOTS = os.environ.get("TJ_UI_SCREENSHOTS")  # a directory: the browser tests save their pages there


@dataclass
class RunningUi:
    process: subprocess.Popen
    port: int
    token: str
    log_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def login_url(self) -> str:
        return f"{self.base}/#token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def request(self, path: str, method: str = "GET", headers: dict[str, str] | None = None, body: Any = None):
        """(status, parsed JSON body) of one plain HTTP request, with the token unless headers say otherwise."""
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_ui(kubeconfig: Path, directory: Path, *extra: str) -> RunningUi:
    port, token = free_port(), secrets.token_urlsafe(16)
    command = [sys.executable, "-m", "trainingjob.cli", "ui", "--kubeconfig", str(kubeconfig), "--port", str(port)]
    command += ["--token", token, "--history-dir", str(directory / "history"), *extra]
    log_path = directory / "ui.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    running = RunningUi(process, port, token, log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"tj ui exited with {process.returncode}:\n{running.log_tail()}")
        try:
            if running.request("/api/whoami")[0] == 200:
                return running
        except OSError:
            pass
        time.sleep(0.2)
    running.stop()
    raise AssertionError(f"tj ui did not answer within 60s:\n{running.log_tail()}")


def require_chromium() -> Path:
    """Debian's Chromium (scripts/system-packages.sh, which `make test` runs, installs it)."""
    if not (CHROMIUM.is_file() or shutil.which(str(CHROMIUM))):
        missing_prerequisite(f"{CHROMIUM} not found: apt-get install chromium (or set TJ_CHROMIUM)")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped on purpose: Playwright's sync API keeps an event loop running in the main thread while it is
    open, and every later test that calls `asyncio.run` would fail in the same pytest session."""
    executable = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def admin_ui(cluster: Any, operator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningUi]:
    """`tj ui` with the admin kubeconfig (a user who may do everything), for the whole session."""
    running = start_ui(cluster.kubeconfig, tmp_path_factory.mktemp("ui-admin"))
    yield running
    running.stop()
    print(f"tj ui log: {running.log_path}")


@pytest.fixture
def page(browser: Any, admin_ui: RunningUi) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(UI_TIMEOUT_MS)
    opened.goto(admin_ui.login_url)
    yield opened
    context.close()


def screenshot(page: Any, name: str, full_page: bool = False) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=full_page)


def restricted_kubeconfig(kube: Kube, namespace: str, path: Path, verbs: list[str]) -> tuple[Path, str]:
    """A kubeconfig (context namespace: `namespace`) for ServiceAccount `viewer`, which may only `verbs` on
    TrainingJobs of `namespace` and read their Events and pod logs. Returns (path, user name)."""
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": "viewer"}})
    rules = [
        {"apiGroups": ["ml.example.com"], "resources": ["trainingjobs"], "verbs": verbs},
        {"apiGroups": [""], "resources": ["events", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    kube.rbac.create_namespaced_role(namespace, {"metadata": {"name": "viewer"}, "rules": rules})
    binding = {
        "metadata": {"name": "viewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": namespace}],
    }
    kube.rbac.create_namespaced_role_binding(namespace, binding)
    path = token_kubeconfig(kube, "viewer", namespace, path, context_namespace=namespace)
    return path, f"system:serviceaccount:{namespace}:viewer"


class Worker0:
    """Plays worker 0 of a kwok-run job: real pod-bound token, real progress endpoint (like simulate-training)."""

    def __init__(self, kubeconfig: Path, namespace: str, job: str) -> None:
        from kubernetes_asyncio import client, config

        from trainingjob.cluster.simulate import worker_credentials
        from trainingjob.sdk import ProgressReporter

        self._directory = tempfile.TemporaryDirectory(prefix="tj-ui-worker-")

        async def credentials() -> dict[str, str]:
            await config.load_kube_config(config_file=str(kubeconfig))
            async with client.ApiClient() as api:
                return await worker_credentials(api, namespace, job, Path(self._directory.name))

        # In a thread of its own: Playwright's sync API keeps an event loop marked running in this one.
        with ThreadPoolExecutor(1) as pool:
            env = pool.submit(asyncio.run, credentials()).result(timeout=60)
        self.reporter = ProgressReporter(env=env, min_interval=0.0)

    def report(self, epoch: int, total: int, **metrics: float) -> None:
        self.reporter.report_progress(epoch=epoch, total_epochs=total, metrics=metrics)
        self.reporter.report_checkpoint(f"/checkpoints/ckpt-{epoch:08d}", epoch=epoch)
        assert self.reporter.flush(), "the operator's progress endpoint refused the report"

    def close(self) -> None:
        self._directory.cleanup()


def process_node_job(kube: Kube, name: str, script: str) -> dict[str, Any]:
    """A TrainingJob whose one worker really runs `script` on a local process node (kwok serves no logs), as uid
    1000 under PodSecurity `restricted`; skips the test when the cluster has no such node (issue 11)."""
    from tests.jobs import job_manifest
    from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE

    if not kube.core.list_node(label_selector=",".join(f"{k}={v}" for k, v in LOCAL_NODE_SELECTOR.items())).items:
        pytest.skip("no local process node in this cluster (pods that really run, issue 11): kwok serves no logs")
    command = ["python3", "-u", "-c", script]
    manifest = job_manifest(
        name, complete_after=None, image=STDLIB_IMAGE, command=command, securityContext=dict(RESTRICTED_CONTAINER)
    )
    manifest["spec"]["scheduling"] = {"nodeSelector": LOCAL_NODE_SELECTOR, "tolerations": [LOCAL_NODE_TOLERATION]}
    return manifest


def wait_for_job(kube: Kube, namespace: str, name: str, check: Any, what: str, timeout: float = 60) -> None:
    from tests.jobs import get_job

    wait_until(lambda: check(get_job(kube, namespace, name)), timeout, what)


class OtherOrigin(http.server.BaseHTTPRequestHandler):
    """Another local service (another port: another origin, but the same site): serves the pages it is given and
    records the Cookie header of every request it gets."""

    pages: dict[str, str] = {}
    cookies: list[str] = []

    def do_GET(self) -> None:
        OtherOrigin.cookies.append(self.headers.get("Cookie") or "")
        body = OtherOrigin.pages.get(self.path, "<!doctype html><title>another local service</title>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_origin() -> Iterator[str]:
    """The base URL of a fresh OtherOrigin on a free local port."""
    OtherOrigin.pages, OtherOrigin.cookies = {}, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), OtherOrigin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
