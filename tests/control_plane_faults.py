"""Faults injected into the session's local control plane: restart or freeze a component, compact etcd; and the
fixtures of the tests that inject them (`faulted_operator`, `restored_control_plane`).

Every helper keeps state.json true (a restarted component's new pid is saved), so `tj cluster down` and the next
session's `up` still find every process; restarts reuse the exact command line the running process was given.

The tests run a dedicated operator without leader election: with it, a leader that cannot renew its Lease for 10 s
exits (70) on purpose and a Deployment restarts it, which would hide the informers' own recovery (the operator
killed and restarted is what the kill points test). The session's operator is stopped meanwhile (two operators
would both write) and replaced by a fresh one afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.operator_harness import RunningOperator, start_operator
from trainingjob.cluster import components as c
from trainingjob.cluster.control_plane import ClusterState, component_running
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.process import start, stop, wait_healthy

# Watches end every 5 s (process.watch_timeout), so a healthy operator hears from the API server well within 10 s.
STUCK_AFTER = 10
CONTROL_PLANE = ("etcd", "kube-apiserver")
# The API server's own clients do not always recover from its restart by themselves, and that is not what is tested
# here: in one run of three kube-scheduler 1.35 never bound pods recreated under a just-deleted name ("Scheduler cache
# is corrupted"), and kube-controller-manager once took over a minute to create a new namespace's ServiceAccount.
# The tests restart the scheduler with the API server; after every test both start afresh.
CLIENTS = ("kube-controller-manager", "kube-scheduler")
RESTORED = (*CONTROL_PLANE, *CLIENTS)
RELISTED = "resourceVersion too old; listing again"


def session_cluster() -> ClusterState:
    from tests.conftest import TEST_CLUSTER_NAME

    state = ClusterState.load(TEST_CLUSTER_NAME)
    assert state is not None, f"no local cluster {TEST_CLUSTER_NAME!r} (these tests need one started by the session)"
    return state


def command_line(pid: int) -> list[str]:
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part]


def restart(state: ClusterState, names: tuple[str, ...], while_down: Callable[[], object] | None = None) -> None:
    """Stop `names` (last first, so etcd outlives the API server), call `while_down` (if given) while they are all
    stopped, then start them again in order, each with the command line it ran with, waiting until each is healthy."""
    commands = {name: command_line(state.pids[name]) for name in names}
    for name in reversed(names):
        stop(state.pids[name], state.binaries[name])
    if while_down is not None:
        while_down()
    for name in names:
        start_again(state, name, commands[name])


def start_again(state: ClusterState, name: str, command: list[str], attempts: int = 10) -> None:
    """Start `name` with its old command line (its ports too) and wait until it is healthy. While it was down, its
    port was free for anyone: a client's ephemeral port or another cluster's port probe can hold it for a moment, and
    then the component exits at once with "address already in use" (CI once lost kube-controller-manager, and every
    namespace's ServiceAccount after it, that way). Try again a few times before giving up."""
    layout = state.layout
    log_path = layout.logs / f"{name}.log"
    check = c.health_checks(layout)[name]
    for attempt in range(1, attempts + 1):
        state.pids[name] = start(name, command, log_path, layout.root)
        state.save()
        try:
            wait_healthy(name, state.pids[name], state.binaries[name], check, layout.pki / "ca.crt", log_path, 90)
            return
        except ClusterError as error:
            if "address already in use" not in str(error) or attempt == attempts:
                raise
            time.sleep(2)


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) inside the block: its sockets stay open, it reads and answers nothing."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def ensure_running(state: ClusterState, names: tuple[str, ...], commands: dict[str, list[str]]) -> None:
    """After a test: SIGCONT whatever may still be stopped and start any of `names` that is gone."""
    for name in names:
        with contextlib.suppress(ProcessLookupError, KeyError):
            os.kill(state.pids[name], signal.SIGCONT)
    for name in names:
        if not component_running(state, name):
            start_again(state, name, commands[name])


def etcd_call(state: ClusterState, method: str, body: dict) -> dict:
    """One request to etcd's gRPC gateway (JSON over HTTPS), as the cluster's admin client certificate."""
    context = ssl.create_default_context(cafile=str(state.layout.pki / "ca.crt"))
    admin = state.layout.pki / "admin"
    context.load_cert_chain(f"{admin}.crt", f"{admin}.key")
    request = urllib.request.Request(
        f"https://127.0.0.1:{state.ports['etcd']}/v3/{method}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # etcd says why in the body: keep it for the failure's message
        raise AssertionError(f"etcd {method} {body}: HTTP {error.code} {error.read()[:500]!r}") from error


def bump_etcd_revision(state: ClusterState) -> int:
    """Write (then delete) a key outside the API server's /registry prefix: etcd's revision moves past every
    resourceVersion a client has seen so far, without touching any Kubernetes object; the revision after it."""
    key = base64.b64encode(b"/tj-tests/revision-bump").decode()
    etcd_call(state, "kv/put", {"key": key, "value": base64.b64encode(b"1").decode()})
    return int(etcd_call(state, "kv/deleterange", {"key": key})["header"]["revision"])


def compact_etcd(state: ClusterState) -> int:
    """Compact etcd's history up to its current revision (physically); the revision compacted to.

    The revision is first moved on by a write outside /registry: etcd refuses (400) a compaction to a revision it
    has compacted already, which the last one is when nothing was written since, or the API server's own compactor
    (every 5 minutes) just took it."""
    revision = bump_etcd_revision(state)
    etcd_call(state, "kv/compaction", {"revision": str(revision), "physical": True})
    return revision


@pytest.fixture(scope="module")
def faulted_operator(operator: RunningOperator, request: pytest.FixtureRequest) -> Iterator[RunningOperator]:
    """The operator a test module faults, in place of the session's (logging to `<module>.log` beside its log); a
    fresh session operator afterwards."""
    operator.stop()
    log_path = operator.log_path.with_name(f"{request.module.__name__.rsplit('.', 1)[-1]}.log")
    dedicated = start_operator(
        operator.kubeconfig, log_path, "--no-leader-elect", "--reconcile-stuck-after", str(STUCK_AFTER)
    )
    try:
        yield dedicated
    finally:
        dedicated.stop()
        successor = start_operator(operator.kubeconfig, operator.log_path.with_name(f"after-{log_path.name}"))
        for field in ("process", "log_path", "progress_port", "metrics_port", "webhook_port", "health_url"):
            setattr(operator, field, getattr(successor, field))


@pytest.fixture
def restored_control_plane() -> Iterator[object]:
    """The session cluster, with etcd and the API server running and unfrozen again after the test, whatever
    happened in it, and their clients started afresh (the tests after this one share the cluster)."""
    state = session_cluster()
    commands = {name: command_line(state.pids[name]) for name in RESTORED}
    try:
        yield state
    finally:
        ensure_running(state, RESTORED, commands)
        restart(state, CLIENTS)


def health(running: RunningOperator) -> tuple[int, str]:
    """/healthz on the metrics port: (status, body); (0, error) when it does not answer."""
    try:
        with urllib.request.urlopen(f"{running.metrics_url}/healthz", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:
        return 0, str(error)


def log_since(running: RunningOperator, offset: int) -> str:
    return running.log_path.read_bytes()[offset:].decode(errors="replace")


def api_requests(running: RunningOperator) -> dict[tuple[str, str, str], float]:
    """trainingjob_api_requests_total from the operator's /metrics: (verb, resource, code) -> requests so far (its
    lists and watches are GETs of the watched resource)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{running.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts = {}
    for family in text_string_to_metric_families(text):
        if family.name == "trainingjob_api_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    labels = sample.labels
                    counts[(labels["verb"], labels["resource"], labels["code"])] = sample.value
    return counts
