"""`tj cluster` as a user runs it: up, no-op up, status, recovery from a killed component, down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

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


def test_cluster_lifecycle_from_the_command_line(cluster: object) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    try:
        started = tj("cluster", "up", "--name", name, "--nodes", "2")
        assert started.returncode == 0, started.stderr
        kubeconfig = tj("cluster", "kubeconfig", "--name", name).stdout.strip()
        assert f"export KUBECONFIG={kubeconfig}" in started.stdout
        assert "export PATH=" in started.stdout
        state = state_of(name)
        nodes = kubectl(state, kubeconfig, "get", "nodes", "-o", "name")
        assert nodes.split() == ["node/tj-node-0", "node/tj-node-1"]

        again = tj("cluster", "up", "--name", name)
        assert again.returncode == 0 and "already running" in again.stderr
        assert state_of(name)["pids"] == state["pids"]

        status = tj("cluster", "status", "--name", name)
        assert status.returncode == 0, status.stdout
        assert status.stdout.count(" ok") == 5

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
    assert not Path(kubeconfig).parent.exists()
    assert tj("cluster", "status", "--name", name).returncode == 1


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
