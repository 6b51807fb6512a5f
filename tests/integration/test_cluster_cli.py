"""`tj cluster` as a user runs it: up, no-op up, status, recovery from a killed node agent and from a killed
component, down (which kills every pod of its local node)."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.local_node import processes_with

pytestmark = pytest.mark.integration


def tj(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def state_of(name: str) -> dict:
    kubeconfig = Path(tj("cluster", "kubeconfig", "--name", name).stdout.strip())
    return json.loads((kubeconfig.parent / "state.json").read_text())


def kubectl(state: dict, kubeconfig: str, *args: str) -> str:
    result = subprocess.run(
        [state["binaries"]["kubectl"], f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def local_pod_manifest(directory: Path, marker: str) -> Path:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sleeper", "namespace": "default"},
        "spec": {
            "nodeSelector": {"ml.example.com/node-runtime": "process"},
            "tolerations": [{"key": "ml.example.com/node-runtime", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11-slim",
                    "command": ["python3", "-c", f"import time; tag = {marker!r}; time.sleep(600)"],
                }
            ],
        },
    }
    path = directory / "pod.json"
    path.write_text(json.dumps(pod))
    return path


def session_network() -> dict | None:
    from tests.conftest import TEST_CLUSTER_NAME
    from trainingjob.cluster.control_plane import ClusterState

    state = ClusterState.load(TEST_CLUSTER_NAME)
    return state.network if state is not None else None


def test_cluster_lifecycle_from_the_command_line(cluster: object, tmp_path: Path) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    try:
        started = tj("cluster", "up", "--name", name, "--nodes", "2")
        assert started.returncode == 0, started.stderr
        kubeconfig = tj("cluster", "kubeconfig", "--name", name).stdout.strip()
        assert f"export KUBECONFIG={kubeconfig}" in started.stdout
        assert "export PATH=" in started.stdout
        state = state_of(name)
        nodes = kubectl(state, kubeconfig, "get", "nodes", "-o", "name")
        assert nodes.split() == ["node/tj-local-0", "node/tj-node-0", "node/tj-node-1"]  # one local node by default

        again = tj("cluster", "up", "--name", name)
        assert again.returncode == 0 and "already running" in again.stderr
        assert state_of(name)["pids"] == state["pids"]

        status = tj("cluster", "status", "--name", name)
        assert status.returncode == 0, status.stdout
        assert status.stdout.count(" ok") == 6

        marker = f"pod-{uuid.uuid4().hex}"
        kubectl(state, kubeconfig, "apply", "-f", str(local_pod_manifest(tmp_path, marker)))
        kubectl(state, kubeconfig, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=120s")
        assert processes_with(marker)
        os.kill(state["pids"]["tj-local-0"], signal.SIGKILL)
        restarted = tj("cluster", "up", "--name", name)
        assert restarted.returncode == 0 and "restarting stopped node agent(s)" in restarted.stderr, restarted.stderr
        assert state_of(name)["pids"]["kube-apiserver"] == state["pids"]["kube-apiserver"]
        assert processes_with(marker), "a restarted agent keeps the pods it adopts"
        session = session_network()
        if session and state.get("network"):  # two clusters on one machine: their own bridge, no shared addresses
            assert state["network"]["bridge"] != session["bridge"]
            assert not ipaddress.ip_network(state["network"]["subnet"]).overlaps(
                ipaddress.ip_network(session["subnet"])
            )

        os.kill(state["pids"]["kube-scheduler"], signal.SIGKILL)
        broken = tj("cluster", "status", "--name", name)
        assert broken.returncode == 1
        assert "kube-scheduler" in broken.stdout and "stopped" in broken.stdout

        recovered = tj("cluster", "up", "--name", name, "--nodes", "2")
        assert recovered.returncode == 0, recovered.stderr
        assert "stale state" in recovered.stderr
        new_state = state_of(name)
        assert all(not _alive(pid) for pid in state["pids"].values())
    finally:
        removed = tj("cluster", "down", "--name", name)
    assert removed.returncode == 0
    assert all(not _alive(pid) for pid in new_state["pids"].values())
    assert not processes_with(marker), "down kills every pod process"
    if new_state.get("network"):
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        assert new_state["network"]["bridge"] not in links
    assert not Path(kubeconfig).parent.exists()
    assert tj("cluster", "status", "--name", name).returncode == 1


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
