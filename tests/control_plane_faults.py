"""Faults injected into the session's local control plane: restart or freeze a component, compact etcd.

Every helper keeps state.json true (a restarted component's new pid is saved), so `tj cluster down` and the next
session's `up` still find every process; restarts reuse the exact command line the running process was given.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from trainingjob.cluster import components as c
from trainingjob.cluster.control_plane import ClusterState, component_running
from trainingjob.cluster.process import start, stop, wait_healthy


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


def start_again(state: ClusterState, name: str, command: list[str]) -> None:
    layout = state.layout
    log_path = layout.logs / f"{name}.log"
    state.pids[name] = start(name, command, log_path, layout.root)
    state.save()
    check = c.health_checks(layout)[name]
    wait_healthy(name, state.pids[name], state.binaries[name], check, layout.pki / "ca.crt", log_path, 90)


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
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return json.loads(response.read())


def bump_etcd_revision(state: ClusterState) -> int:
    """Write (then delete) a key outside the API server's /registry prefix: etcd's revision moves past every
    resourceVersion a client has seen so far, without touching any Kubernetes object; the revision after it."""
    key = base64.b64encode(b"/tj-tests/revision-bump").decode()
    etcd_call(state, "kv/put", {"key": key, "value": base64.b64encode(b"1").decode()})
    return int(etcd_call(state, "kv/deleterange", {"key": key})["header"]["revision"])


def compact_etcd(state: ClusterState) -> int:
    """Compact etcd's history up to its current revision (physically); the revision compacted to."""
    key = base64.b64encode(b"/registry/health").decode()
    revision = int(etcd_call(state, "kv/range", {"key": key, "count_only": True})["header"]["revision"])
    etcd_call(state, "kv/compaction", {"revision": str(revision), "physical": True})
    return revision
