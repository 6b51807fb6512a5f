"""The pod sandbox: its network namespace and IP, and the files every container shares (/etc/hosts, resolv.conf,
hostname), as the kubelet and a CRI runtime prepare them before the first container starts.

Addresses come from the node's podCIDR; an allocation is a file named after the IP, created exclusively and
holding the pod's uid, so it survives agent restarts and two pods can never get one address. Without isolation
(the agent not root) or with `hostNetwork`, there is no network namespace: the pod shares the host's network and its
IP is the node's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainingjob.node.config import CLUSTER_DOMAIN, NodeConfig
from trainingjob.node.network import iproute
from trainingjob.node.network.netplan import pod_addresses
from trainingjob.node.runtime.launch import read_json, write_json

HOSTS_HEADER = """# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
"""


class SandboxError(Exception):
    """The sandbox could not be created (FailedCreatePodSandBox)."""


@dataclass
class Sandbox:
    ip: str
    netns: str | None
    veth: str | None
    hostname: str

    @property
    def netns_path(self) -> str | None:
        return str(iproute.netns_path(self.netns)) if self.netns else None


def pod_hostname(pod: dict[str, Any]) -> str:
    spec = pod["spec"]
    hostname = (spec.get("hostname") or pod["metadata"]["name"])[:63].rstrip("-.")
    if spec.get("setHostnameAsFQDN") and spec.get("subdomain"):
        return f"{hostname}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{CLUSTER_DOMAIN}"[:64]
    return hostname


def hosts_file(pod: dict[str, Any], ip: str) -> str:
    spec = pod["spec"]
    hostname = (spec.get("hostname") or pod["metadata"]["name"])[:63].rstrip("-.")
    names = [hostname]
    if spec.get("subdomain"):
        names.insert(0, f"{hostname}.{spec['subdomain']}.{pod['metadata']['namespace']}.svc.{CLUSTER_DOMAIN}")
    lines = [HOSTS_HEADER, f"{ip}\t{chr(9).join(names)}\n"]
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("\n# Entries added by HostAliases.\n")
        lines += [f"{a['ip']}\t{chr(9).join(a.get('hostnames') or [])}\n" for a in aliases]
    return "".join(lines)


def _host_resolv() -> tuple[list[str], list[str], list[str]]:
    nameservers, searches, options = [], [], []
    with contextlib.suppress(OSError):
        for line in Path("/etc/resolv.conf").read_text().splitlines():
            words = line.split()
            if not words or words[0].startswith(("#", ";")):
                continue
            if words[0] == "nameserver" and len(words) > 1:
                nameservers.append(words[1])
            elif words[0] in ("search", "domain"):
                searches = words[1:]
            elif words[0] == "options":
                options += words[1:]
    return nameservers, searches, options


def resolv_conf(pod: dict[str, Any], dns_server: str | None) -> str:
    """resolv.conf for the pod's dnsPolicy: ClusterFirst (our DNS, cluster search path, ndots:5), Default (the
    host's), None (dnsConfig only); dnsConfig is merged in as the kubelet does."""
    spec = pod["spec"]
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "ClusterFirst" and spec.get("hostNetwork"):
        policy = "Default"  # the kubelet's rule: host-network pods use the node's resolver unless ...WithHostNet
    host_servers, host_searches, host_options = _host_resolv()
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet") and dns_server:
        namespace = pod["metadata"]["namespace"]
        servers = [dns_server]
        searches = [f"{namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN, *host_searches]
        options = ["ndots:5"]
    elif policy == "None":
        servers, searches, options = [], [], []
    else:
        servers, searches, options = host_servers, host_searches, host_options
    config = spec.get("dnsConfig") or {}
    servers = list(dict.fromkeys(servers + (config.get("nameservers") or [])))[:3]
    searches = list(dict.fromkeys(searches + (config.get("searches") or [])))[:32]
    named = {o.split(":")[0]: o for o in options}
    for option in config.get("options") or []:
        named[option["name"]] = f"{option['name']}:{option['value']}" if option.get("value") else option["name"]
    lines = [f"nameserver {s}" for s in servers]
    if searches:
        lines.append("search " + " ".join(searches))
    if named:
        lines.append("options " + " ".join(named.values()))
    return "\n".join(lines) + "\n"


def _short(config: NodeConfig, uid: str, length: int) -> str:
    return hashlib.sha256(f"{config.state_dir}/{uid}".encode()).hexdigest()[:length]


class SandboxManager:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.ipam = config.root / "ipam"
        self.ipam.mkdir(parents=True, exist_ok=True)

    def _allocate(self, uid: str) -> str:
        for entry in self.ipam.iterdir():
            if entry.read_text() == uid:
                return entry.name
        assert self.config.pod_cidr
        for address in pod_addresses(self.config.pod_cidr):
            try:
                fd = os.open(self.ipam / address, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(uid)
            return address
        raise SandboxError(f"no free pod address left in {self.config.pod_cidr}")

    def _release(self, uid: str) -> None:
        for entry in self.ipam.iterdir():
            with contextlib.suppress(OSError):
                if entry.read_text() == uid:
                    entry.unlink()

    def create(self, pod: dict[str, Any], directory: Path) -> Sandbox:
        """Idempotent: a sandbox recorded in the pod's directory is re-checked and completed, not replaced."""
        uid = pod["metadata"]["uid"]
        recorded = read_json(directory / "sandbox.json")
        if self.config.isolate and not pod["spec"].get("hostNetwork"):
            pod_network = self.config.pod_network
            assert pod_network is not None
            ip = recorded["ip"] if recorded else self._allocate(uid)
            sandbox = Sandbox(ip, f"tj-{_short(self.config, uid, 12)}", f"tjv{_short(self.config, uid, 11)}", "")
            write_json(directory / "sandbox.json", {"ip": ip, "netns": sandbox.netns, "veth": sandbox.veth})
            try:
                iproute.create_pod_netns(sandbox.netns or "", sandbox.veth or "", ip, pod_network)
            except iproute.NetworkError as error:
                raise SandboxError(str(error)) from error
        else:
            sandbox = Sandbox(self.config.node_ip, None, None, "")
            write_json(directory / "sandbox.json", {"ip": sandbox.ip, "netns": None, "veth": None})
        sandbox.hostname = self.config.name if pod["spec"].get("hostNetwork") else pod_hostname(pod)
        etc = directory / "etc"
        etc.mkdir(exist_ok=True)
        dns = self.config.node_ip if self.config.isolate else None
        (etc / "hosts").write_text(hosts_file(pod, sandbox.ip))
        (etc / "resolv.conf").write_text(resolv_conf(pod, dns))
        (etc / "hostname").write_text(sandbox.hostname + "\n")
        for name in ("hosts", "resolv.conf", "hostname"):
            (etc / name).chmod(0o644)
        return sandbox

    def load(self, pod: dict[str, Any], directory: Path) -> Sandbox | None:
        recorded = read_json(directory / "sandbox.json")
        if not recorded:
            return None
        hostname = self.config.name if pod["spec"].get("hostNetwork") else pod_hostname(pod)
        return Sandbox(recorded["ip"], recorded.get("netns"), recorded.get("veth"), hostname)

    def teardown(self, uid: str, directory: Path) -> None:
        """Remove the network namespace and free the address; the pod's IP stays in its status, as on a kubelet."""
        recorded = read_json(directory / "sandbox.json")
        if recorded and recorded.get("netns"):
            iproute.delete_pod_netns(recorded["netns"], recorded.get("veth") or "")
        self._release(uid)
