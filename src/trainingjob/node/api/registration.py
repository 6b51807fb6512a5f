"""Node registration and heartbeats, as a kubelet does them.

- The Node object: labels (hostname, os, arch, `ml.example.com/node-runtime=process`), the taint that keeps pods
  which did not ask for a process node away, podCIDR, capacity/allocatable measured from this machine, only an
  InternalIP address (the API server dials the first preferred address type it finds, and would try a Hostname
  first), the log endpoint's port as daemonEndpoints.kubeletEndpoint, and a Ready condition; with GPUs, their
  `nvidia.com/gpu` capacity and feature-discovery labels (devices/advertise.py), kept true when the agent restarts.
- Liveness: the node's Lease in kube-node-lease renewed every 10 s (40 s duration), which is what the node
  lifecycle controller watches; the Node's conditions are re-posted every few minutes or when they change.
"""

from __future__ import annotations

import asyncio
import calendar
import datetime
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainingjob import __version__
from trainingjob.node.api.client import Api, ApiError
from trainingjob.node.config import NODE_LABEL, NODE_LABEL_VALUE, NODE_TAINT, NodeConfig

log = logging.getLogger(__name__)
LEASE_SECONDS = 40
RENEW_SECONDS = 10
STATUS_REPORT_SECONDS = 300
MAX_PODS = 110
# The kubelet's default hard eviction threshold for memory: what it keeps out of allocatable.
EVICTION_MEMORY_KI = 100 * 1024


def now(micro: bool = False) -> str:
    moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def epoch(stamp: str) -> float:
    """Seconds since the epoch of an API timestamp (RFC 3339, UTC)."""
    return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))


def _read(path: str, default: str = "") -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.system()


def architecture() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def machine_resources(state_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) of this machine: CPUs, memory, disk of the node's state directory, pods."""
    memory_ki = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            memory_ki = int(line.split()[1])
    disk = os.statvfs(state_dir)
    disk_ki = disk.f_blocks * disk.f_frsize // 1024
    cpus = str(os.cpu_count() or 1)
    capacity = {"cpu": cpus, "memory": f"{memory_ki}Ki", "ephemeral-storage": f"{disk_ki}Ki", "pods": str(MAX_PODS)}
    allocatable = {
        **capacity,
        "memory": f"{max(0, memory_ki - EVICTION_MEMORY_KI)}Ki",
        "ephemeral-storage": f"{disk_ki * 9 // 10}Ki",
    }
    return capacity, allocatable


def ready_conditions(heartbeat: str, since: dict[str, str] | None = None) -> list[dict[str, Any]]:
    since = since or {}
    pressure = {
        "MemoryPressure": ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        "DiskPressure": ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        "PIDPressure": ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    }
    conditions = [
        {"type": kind, "status": "False", "reason": reason, "message": message}
        for kind, (reason, message) in pressure.items()
    ]
    conditions.append(
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    )
    for condition in conditions:
        condition["lastHeartbeatTime"] = heartbeat
        condition["lastTransitionTime"] = since.get(condition["type"], heartbeat)
    return conditions


def node_status(
    config: NodeConfig, heartbeat: str, since: dict[str, str] | None = None, devices: dict[str, str] | None = None
) -> dict[str, Any]:
    """`devices`: extended resources (nvidia.com/gpu) as a device plugin registers them, in capacity and
    allocatable alike."""
    capacity, allocatable = machine_resources(config.root)
    return {
        "capacity": {**capacity, **(devices or {})},
        "allocatable": {**allocatable, **(devices or {})},
        "conditions": ready_conditions(heartbeat, since),
        "addresses": [{"type": "InternalIP", "address": config.node_ip}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
        "nodeInfo": {
            "machineID": _read("/etc/machine-id"),
            "systemUUID": _read("/sys/class/dmi/id/product_uuid"),
            "bootID": _read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": platform.release(),
            "osImage": _os_image(),
            "containerRuntimeVersion": f"trainingjob-process://{__version__}",
            "kubeletVersion": config.kubernetes_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": architecture(),
        },
    }


def node_labels(config: NodeConfig, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": config.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": architecture(),
        NODE_LABEL: NODE_LABEL_VALUE,
        "node.kubernetes.io/instance-type": "local-process",
        **(extra or {}),
    }


@dataclass(frozen=True)
class NodeDevices:
    """What the node's devices add to its Node: extended resources and labels (devices/advertise.py), and the
    label prefixes those labels own (stale ones, from an earlier run with other devices, are removed)."""

    resources: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    owned_prefixes: tuple[str, ...] = ("nvidia.com/", "ml.example.com/fake-gpus")
    owned_resources: tuple[str, ...] = ("nvidia.com/gpu",)


def node_object(config: NodeConfig, heartbeat: str, devices: NodeDevices | None = None) -> dict[str, Any]:
    devices = devices or NodeDevices()
    spec: dict[str, Any] = {"taints": [dict(NODE_TAINT)]}
    if config.pod_cidr:
        spec.update(podCIDR=config.pod_cidr, podCIDRs=[config.pod_cidr])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.name,
            "labels": node_labels(config, devices.labels),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": node_status(config, heartbeat, devices=devices.resources),
    }


def label_patch(node: dict[str, Any], devices: NodeDevices) -> dict[str, str | None]:
    """Device labels to set, and stale ones (a prefix the devices own, no longer wanted) to remove."""
    current = (node.get("metadata") or {}).get("labels") or {}
    stale = {k: None for k in current if k.startswith(devices.owned_prefixes) and k not in devices.labels}
    wanted = {k: v for k, v in devices.labels.items() if current.get(k) != v}
    return {**stale, **wanted}


def resources_of(node: dict[str, Any], devices: NodeDevices) -> dict[str, str]:
    """The devices' resources, and "0" for one the node still shows but no longer has (a strategic merge patch of
    status would keep it otherwise, as the kubelet's reconcileExtendedResource knows)."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    gone = {name: "0" for name in devices.owned_resources if name in capacity and name not in devices.resources}
    return {**gone, **devices.resources}


def lease_object(config: NodeConfig, node_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": config.name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": config.name, "uid": node_uid}],
        },
        "spec": {"holderIdentity": config.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": now(micro=True)},
    }


class Registration:
    """Registers the Node, then keeps its Lease and status fresh until cancelled."""

    def __init__(self, api: Api, config: NodeConfig, devices: NodeDevices | None = None) -> None:
        self.api = api
        self.config = config
        self.devices = devices or NodeDevices()
        self.node_path = f"/api/v1/nodes/{config.name}"
        self.lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{config.name}"
        self.registered = asyncio.Event()
        self.node_uid = ""

    async def register(self) -> None:
        try:
            node = await self.api.create("/api/v1/nodes", node_object(self.config, now(), self.devices))
        except ApiError as error:
            if error.status != 409:
                raise
            node = await self.api.get(self.node_path)
            if labels := label_patch(node, self.devices):
                node = await self.api.patch(self.node_path, {"metadata": {"labels": labels}})
            await self.post_status(node)
        else:
            # Status sent with a create is dropped by the API server: post it through the subresource.
            await self.post_status(node)
        self.node_uid = node["metadata"]["uid"]
        self.registered.set()
        log.info("node %s registered", self.config.name)

    async def post_status(self, node: dict[str, Any]) -> None:
        since = {
            c["type"]: c["lastTransitionTime"]
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("status") == ("True" if c["type"] == "Ready" else "False")
        }
        body = {"status": node_status(self.config, now(), since, resources_of(node, self.devices))}
        await self.api.patch(f"{self.node_path}/status", body, kind="strategic")

    async def renew_lease(self) -> None:
        try:
            await self.api.patch(
                self.lease_path, {"spec": {"renewTime": now(micro=True), "holderIdentity": self.config.name}}
            )
        except ApiError as error:
            if error.status != 404:
                raise
            await self.api.create(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                lease_object(self.config, self.node_uid),
            )

    async def run(self) -> None:
        attempt = 0
        while not self.registered.is_set():
            try:
                await self.register()
            except Exception as error:
                attempt += 1
                log.warning("registering node %s failed: %s", self.config.name, error)
                await asyncio.sleep(min(30, attempt * 2))
        last_status = asyncio.get_running_loop().time()
        while True:
            try:
                await self.renew_lease()
                if asyncio.get_running_loop().time() - last_status >= STATUS_REPORT_SECONDS:
                    await self.post_status(await self.api.get(self.node_path))
                    last_status = asyncio.get_running_loop().time()
            except Exception as error:
                log.warning("heartbeat of node %s failed: %s", self.config.name, error)
            await asyncio.sleep(RENEW_SECONDS)
