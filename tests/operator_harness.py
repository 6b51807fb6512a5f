"""Run the real operator as a subprocess, authenticated as the ServiceAccount we ship (deploy/rbac/)."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.kube import Kube

REPO = Path(__file__).resolve().parents[1]
OPERATOR_NAMESPACE = "trainingjob-system"
OPERATOR_ACCOUNT = "trainingjob-operator"
# Operators the tests start report stuck pods and force-delete them on lost nodes sooner than the defaults (60 s,
# 300 s), so the tests of those bounds take seconds. Every operator gets them: a standby that takes over (the
# leader-election test) becomes the session's operator.
STUCK_AFTER_SECONDS = 5
FORCE_DELETE_AFTER_SECONDS = 20
BOUND_FLAGS = (
    *("--stuck-after", str(STUCK_AFTER_SECONDS)),
    *("--force-delete-after", str(FORCE_DELETE_AFTER_SECONDS)),
    # The local nodes' (fake) GPU exporters sample every 10 s; scraping them every 5 s keeps telemetry tests short.
    *("--gpu-metrics-interval", "5"),
)
# The seed LLMModel's gpuType H100 selects the kwok GPU nodes by their `accelerator` label (docs/serving.md): the
# operator setting a real cluster would point at nvidia.com/gpu.product.
SERVING_FLAGS = ("--gpu-type", "H100=accelerator=nvidia-gpu")
STARTED: list[subprocess.Popen] = []  # every operator process start_operator started, for stop_all()
WEBHOOK_ANSWER_SECONDS = 20
REVIVALS: list[str] = []  # each revive() or restore_webhooks(): why, for the run's summary (conftest.py)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RunningOperator:
    process: subprocess.Popen
    log_path: Path
    kubeconfig: Path
    health_url: str
    progress_port: int = 0
    metrics_port: int = 0
    webhook_port: int = 0
    progress_host: str = "127.0.0.1"
    extra_args: tuple[str, ...] = ()
    # The process a test stopped on purpose (stop()): it stays stopped; only one that exited on its own is revived.
    stopped_process: subprocess.Popen | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    @property
    def progress_url(self) -> str:
        return f"https://{self.progress_host}:{self.progress_port}"

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, hard: bool = False) -> None:
        self.stopped_process = self.process
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def progress_address() -> str:
    """The session cluster's pod-network gateway, which pods on local nodes reach the host at; 127.0.0.1 without
    one (a cluster not started by this session's `tj cluster up`, or local nodes without root)."""
    from tests.conftest import TEST_CLUSTER_NAME
    from trainingjob.cluster.control_plane import ClusterState

    state = ClusterState.load(TEST_CLUSTER_NAME)
    network = state.pod_network if state is not None else None
    return network.gateway if network is not None else "127.0.0.1"


def webhook_caller_flags(cluster: str | None = None) -> tuple[str, ...]:
    """Let only the API server call /mutate and /validate, by the client certificate the session cluster (or the
    local cluster named) gives it (cluster/webhook_client.py)."""
    from tests.conftest import TEST_CLUSTER_NAME
    from trainingjob.cluster.control_plane import ClusterState
    from trainingjob.cluster.webhook_client import operator_flags

    state = ClusterState.load(cluster or TEST_CLUSTER_NAME)
    return () if state is None else operator_flags(state.layout)


def start_operator(
    kubeconfig: Path,
    log_path: Path,
    *extra_args: str,
    progress_port: int = 0,
    webhook_port: int = 0,
    cluster: str | None = None,
    wait: bool = True,
) -> RunningOperator:
    """The operator with its webhooks on 127.0.0.1 (the API server calls them there) and its progress endpoint
    where both the tests (playing workers) and real workers on the local process nodes reach it: the pod network's
    gateway, an address of this machine too (127.0.0.1 when the cluster has no pod network). `cluster`: the local
    cluster whose API server calls its webhooks, when it is not the session's. `wait`: return once `/healthz`
    answers (False: at once, e.g. while the API server is down, as a kubelet restarts a container)."""
    progress_host = progress_address()
    port = free_port()
    health_url = f"http://127.0.0.1:{port}/healthz"
    progress_port = progress_port or free_port()
    metrics_port = free_port()
    webhook_port = webhook_port or free_port()
    command = [
        *(sys.executable, "-m", "trainingjob.cli"),
        *operator_arguments(
            health_url, progress_host, progress_port, metrics_port, webhook_port, extra_args, cluster=cluster
        ),
    ]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    STARTED.append(process)
    running = RunningOperator(
        process, log_path, kubeconfig, health_url, progress_port, metrics_port, webhook_port, progress_host, extra_args
    )
    return wait_healthy(running) if wait else running


def operator_arguments(
    health_url: str,
    progress_host: str,
    progress_port: int,
    metrics_port: int,
    webhook_port: int,
    extra_args: tuple[str, ...],
    cluster: str | None = None,
) -> list[str]:
    """`tj operator` with the test operator's endpoints, bounds and `extra_args`."""
    return [
        *("operator", "--all-namespaces", "--log-format", "json"),
        *("--liveness", health_url, "--progress-port", str(progress_port), "--progress-bind", progress_host),
        *("--progress-url", f"https://{progress_host}:{progress_port}", "--metrics-port", str(metrics_port)),
        *("--metrics-bind", "127.0.0.1", "--webhook-port", str(webhook_port), *BOUND_FLAGS, *SERVING_FLAGS),
        *webhook_caller_flags(cluster),
        *extra_args,
    ]


def wait_healthy(running: RunningOperator) -> RunningOperator:
    """`running` once its /healthz answers (it failed if it exits or stays silent for 60 s)."""
    process = running.process
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"operator exited with {process.returncode}:\n{running.log_tail()}")
        if healthy(running.health_url):
            return running
        time.sleep(0.1)
    running.stop()
    raise AssertionError(f"operator not healthy within 60s:\n{running.log_tail()}")


def restart(running: RunningOperator) -> None:
    """Stop the operator and start it again on the same ports: what an upgrade or a rescheduled pod does."""
    running.stop()
    start_again(running)
    running.stopped_process = None


def start_again(running: RunningOperator) -> None:
    """A new process for `running` on the same ports and log (webhooks, progress) and with the same arguments."""
    again = start_operator(
        running.kubeconfig,
        running.log_path,
        *running.extra_args,
        progress_port=running.progress_port,
        webhook_port=running.webhook_port,
    )
    running.process, running.health_url, running.metrics_port = again.process, again.health_url, again.metrics_port


def revive(running: RunningOperator) -> tuple[int, str] | None:
    """Start the operator again if its process exited on its own (not by stop()), on the same ports and log; its
    exit code and the last line it logged before (None: nothing to do).

    The operator exits on purpose when it cannot renew its Lease in time (an API server too slow to answer for
    seconds), so that only a new leader writes; in a Deployment the kubelet starts it again. A session's operator
    that nobody restarts would fail every later test for a reason none of them is about.
    """
    code = running.process.poll()
    if code is None or running.process is running.stopped_process:
        return None
    last_line = running.log_tail(1)
    start_again(running)
    REVIVALS.append(f"exited with code {code}: {last_line[:200]}")
    return code, last_line


def conversion_webhook_base(kube: Kube) -> str | None:
    """The base URL the API server sends TrainingJob conversions to (None: a Service, or no webhook at all)."""
    from trainingjob.api import constants as k

    conversion = kube.extensions.read_custom_resource_definition(k.CRD_NAME).spec.conversion
    url = conversion.webhook.client_config.url if conversion is not None and conversion.webhook else None
    return url.rsplit("/", 1)[0] if url else None


def webhook_problem(base_url: str) -> str | None:
    """Why a webhook server does not answer `<base_url>/healthz` (None: it answers; any certificate is taken)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=2, context=context) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except OSError as error:
        return str(getattr(error, "reason", error))


def restore_webhooks(kube: Kube, running: RunningOperator) -> str | None:
    """Restart the session's operator if it runs but the API server's conversion webhook has not answered for
    WEBHOOK_ANSWER_SECONDS (an operator re-points it within 5 s of its target going away); what was wrong, or None.

    Every TrainingJob read or write in v1alpha1 goes through that webhook: one dead target fails every later test
    with the same 500 (CI met that once, cause unknown), where a kubelet would have restarted the operator.
    """
    if running.process.poll() is not None or running.process is running.stopped_process:
        return None
    deadline = time.monotonic() + WEBHOOK_ANSWER_SECONDS
    while True:
        base = conversion_webhook_base(kube)
        if base is None or not base.startswith("https://127.0.0.1:"):
            return None  # a Service in a cluster the tests did not start: not ours to judge
        problem = webhook_problem(base)
        if problem is None:
            return None
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    what = (
        f"the conversion webhook {base} did not answer for {WEBHOOK_ANSWER_SECONDS}s ({problem}); "
        f"operator's: {running.webhook_url}"
    )
    last_line = running.log_tail(1)
    running.process.kill()
    running.process.wait(timeout=30)
    start_again(running)
    REVIVALS.append(f"restarted: {what}; its log ended: {last_line[:200]}")
    return what


def stop_all() -> None:
    """Stop every operator this session started that still runs (tests swap the session's operator, and one that
    fails half-way must not leave an operator behind, holding the Lease and the webhooks for the next session)."""
    for process in STARTED:
        if process.poll() is None:
            process.terminate()
    for process in STARTED:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False
