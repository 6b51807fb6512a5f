"""Removing pods' local state for good: kill their processes, unmount, delete their network namespaces.

Used by the agent for pods the API no longer has (deleted while the agent was down) and by `tj cluster down`,
which must leave no pod process, mount, namespace or bridge behind. Works from the files alone, so it needs no
running agent and no API server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from trainingjob.node.config import NodeConfig
from trainingjob.node.network import iproute
from trainingjob.node.runtime import cgroups
from trainingjob.node.runtime import syscalls as sc
from trainingjob.node.runtime.containers import attempts
from trainingjob.node.runtime.launch import read_json

KILL_WAIT_SECONDS = 10.0


def unmount_volumes(pod_dir: Path) -> None:
    """Unmount the pod's memory-backed emptyDirs (tmpfs mounts on the host under its directory)."""
    volumes = pod_dir / "volumes"
    if not volumes.is_dir():
        return
    for entry in volumes.iterdir():
        if os.path.ismount(entry):
            with contextlib.suppress(OSError):
                sc.umount(str(entry), sc.MNT_DETACH)


def kill_pod_processes(pod_dir: Path) -> None:
    """SIGKILL every container and shim of the pod, then wait (bounded) until they are gone."""
    processes = []
    containers = pod_dir / "containers"
    if containers.is_dir():
        for container in containers.iterdir():
            processes += attempts(container)
    for process in processes:
        process.kill_now()
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while time.monotonic() < deadline and any(p.shim_alive() or p.container_alive() for p in processes):
        time.sleep(0.05)


def remove_cgroups(pod_dir: Path) -> None:
    """The pod's cgroup directories, found from its attempts' launch files (the agent that made them may have
    run in another cgroup than this process)."""
    containers = pod_dir / "containers"
    runs = [run for container in containers.iterdir() for run in attempts(container)] if containers.is_dir() else []
    dirs = [directory for run in runs for directory in run.cgroup_dirs()]
    cgroups.remove_dirs(dirs)
    cgroups.remove_dirs(sorted({str(Path(d).parent) for d in dirs}))


def remove_pod_state(config: NodeConfig, pod_dir: Path) -> None:
    kill_pod_processes(pod_dir)
    remove_cgroups(pod_dir)
    unmount_volumes(pod_dir)
    recorded = read_json(pod_dir / "sandbox.json")
    if recorded and recorded.get("netns"):
        with contextlib.suppress(iproute.NetworkError, OSError):
            iproute.delete_pod_netns(recorded["netns"], recorded.get("veth") or "")
    ipam = config.root / "ipam"
    if ipam.is_dir():
        for entry in ipam.iterdir():
            with contextlib.suppress(OSError):
                if entry.read_text() == pod_dir.name:
                    entry.unlink()
    shutil.rmtree(pod_dir, ignore_errors=True)


def remove_node_state(node_dir: Path) -> None:
    """Every pod of a stopped node agent (its config.json says where its addresses were allocated)."""
    config_file = node_dir / "config.json"
    if not config_file.exists():
        return
    config = NodeConfig.load(config_file)
    if config.pods_dir.is_dir():
        for pod_dir in config.pods_dir.iterdir():
            if pod_dir.is_dir():
                remove_pod_state(config, pod_dir)
    cgroups.remove_node(config.root / cgroups.CGROUPS_FILE)
