"""The pod network on the host, through iproute2: the cluster's bridge, and one network namespace per pod.

Why `ip` and not netlink from Python: iproute2 is on every machine this runs on (Debian's `iproute2`), its
commands read like the documentation, and a pod needs only a handful of them. Every step is idempotent so a node
agent that restarts half-way through a pod's setup can simply run it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

from trainingjob.node.network.netplan import PodNetwork, bridge_name, choose_subnet
from trainingjob.paths import cache_root

NETNS_DIR = Path("/run/netns")


class NetworkError(Exception):
    """An `ip` command failed; the message has its stderr."""


def ip(*args: str, check: bool = True, input_text: str | None = None) -> str:
    try:
        result = subprocess.run(
            ["ip", *args], capture_output=True, text=True, input=input_text, timeout=30, check=False
        )
    except FileNotFoundError:
        raise NetworkError("the `ip` command (Debian package iproute2) is not installed") from None
    if check and result.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {result.stderr.strip() or f'exit {result.returncode}'}")
    return result.stdout


def networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network an interface or a route of this machine uses."""
    used: list[ipaddress.IPv4Network] = []
    for link in json.loads(ip("-j", "-4", "addr") or "[]"):
        for info in link.get("addr_info", []):
            used.append(ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False))
    for route in json.loads(ip("-j", "-4", "route") or "[]"):
        destination = route.get("dst", "")
        if destination and destination != "default":
            used.append(ipaddress.IPv4Network(destination if "/" in destination else f"{destination}/32", strict=False))
    return used


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """Serializes subnet choices of clusters starting at the same moment on this machine."""
    path = cache_root() / "network.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def link_exists(name: str) -> bool:
    return ip("link", "show", "dev", name, check=False) != ""


def link_address(name: str) -> str:
    """The link's MAC address, lower case."""
    links = json.loads(ip("-j", "link", "show", "dev", name) or "[]")
    return str(links[0].get("address", "")).lower() if links else ""


def _addresses(device: str) -> set[str]:
    links = json.loads(ip("-j", "-4", "addr", "show", "dev", device) or "[]")
    return {f"{a['local']}/{a['prefixlen']}" for link in links for a in link.get("addr_info", [])}


def ensure_bridge(network: PodNetwork, node_indexes: list[int]) -> None:
    """The bridge with its fixed MAC (PodNetwork.bridge_mac), the gateway and the given nodes' addresses, up."""
    if not link_exists(network.bridge):
        ip("link", "add", network.bridge, "address", network.bridge_mac, "type", "bridge")
    elif link_address(network.bridge) != network.bridge_mac:
        ip("link", "set", network.bridge, "address", network.bridge_mac)  # a bridge made before the MAC was fixed
    present = _addresses(network.bridge)
    for address in [network.gateway, *(network.node_ip(i) for i in node_indexes)]:
        cidr = f"{address}/{network.prefix_length}"
        if cidr not in present:
            ip("addr", "add", cidr, "dev", network.bridge)
    ip("link", "set", network.bridge, "up")


def allocate_network(cluster_key: str, node_count: int) -> PodNetwork:
    """Choose the cluster's subnet and create its bridge, atomically with respect to other clusters."""
    bridge = bridge_name(cluster_key)
    with _machine_lock():
        if link_exists(bridge):
            ip("link", "delete", bridge, check=False)
        network = PodNetwork(bridge, choose_subnet(cluster_key, networks_in_use()))
        ensure_bridge(network, list(range(node_count)))
    return network


def delete_bridge(network: PodNetwork) -> None:
    if link_exists(network.bridge):
        ip("link", "delete", network.bridge, check=False)


def netns_path(name: str) -> Path:
    return NETNS_DIR / name


def create_pod_netns(name: str, host_veth: str, address: str, network: PodNetwork) -> None:
    """A network namespace with lo and eth0 (the pod IP, default route via the gateway), wired to the bridge."""
    if not netns_path(name).exists():
        ip("netns", "add", name)
    if not link_exists(host_veth):
        ip("link", "add", host_veth, "type", "veth", "peer", "name", "eth0", "netns", name)
    ip("link", "set", host_veth, "master", network.bridge, "up")
    inside = "\n".join(
        [
            "link set lo up",
            f"addr replace {address}/{network.prefix_length} dev eth0",
            "link set eth0 up",
            f"route replace default via {network.gateway} dev eth0",
        ]
    )
    ip("-n", name, "-batch", "-", input_text=inside + "\n")


def delete_pod_netns(name: str, host_veth: str) -> None:
    """Remove the namespace (its eth0 and the host's veth go with it); nothing left is fine."""
    if netns_path(name).exists():
        ip("netns", "delete", name, check=False)
    if link_exists(host_veth):
        ip("link", "delete", host_veth, check=False)
