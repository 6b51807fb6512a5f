"""The address plan of a cluster's pod network (pure): bridge name, subnet, gateway, node IPs, pod CIDRs.

Each cluster gets its own bridge and its own 10.X.0.0/16, so two clusters on one machine (two developers, two test
sessions) never share addresses: X is derived from the cluster's name and moved on when another interface already
uses that range. Inside a cluster, the gateway (the host side, where the API server and the operator are reached)
is 10.X.0.1, node i answers on 10.X.0.(2+i) (its log endpoint and DNS server), and its pods get addresses from
10.X.(1+i).0/24 (the node's podCIDR). All of it is one L2 segment: pods on different nodes reach each other
directly.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

FIRST_OCTET = 100
OCTETS = 100
MAX_NODES = 200


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def bridge_name(cluster_key: str) -> str:
    """At most 15 characters (IFNAMSIZ - 1), stable for a cluster, unlikely to meet another cluster's."""
    return f"tjbr{_digest(cluster_key) % 16**8:08x}"


@dataclass(frozen=True)
class PodNetwork:
    bridge: str
    subnet: str

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def prefix_length(self) -> int:
        return self.network.prefixlen

    @property
    def gateway(self) -> str:
        return str(self.network.network_address + 1)

    def node_ip(self, index: int) -> str:
        if not 0 <= index < MAX_NODES:
            raise ValueError(f"node index {index} out of range (0..{MAX_NODES - 1})")
        return str(self.network.network_address + 2 + index)

    def pod_cidr(self, index: int) -> str:
        base = self.network.network_address + (index + 1) * 256
        return f"{base}/24"

    @property
    def bridge_mac(self) -> str:
        """A fixed, locally administered unicast MAC for the bridge. Left alone, a Linux bridge takes the lowest MAC
        of its ports and changes it whenever that port comes or goes: every pod still holding the old gateway MAC in
        its neighbour cache then cannot reach the host (API server, DNS, progress endpoint) for tens of seconds."""
        octets = _digest(self.bridge).to_bytes(32, "big")[:6]
        first = (octets[0] | 0x02) & 0xFE  # locally administered, unicast
        return ":".join(f"{octet:02x}" for octet in (first, *octets[1:]))

    def to_dict(self) -> dict[str, str]:
        return {"bridge": self.bridge, "subnet": self.subnet}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> PodNetwork:
        return cls(data["bridge"], data["subnet"])


def choose_subnet(cluster_key: str, in_use: Iterable[ipaddress.IPv4Network]) -> str:
    """The cluster's preferred 10.X.0.0/16, or the next one that overlaps nothing in `in_use`."""
    taken = list(in_use)
    start = _digest(cluster_key) % OCTETS
    for step in range(OCTETS):
        candidate = ipaddress.IPv4Network(f"10.{FIRST_OCTET + (start + step) % OCTETS}.0.0/16")
        if not any(candidate.overlaps(network) for network in taken):
            return str(candidate)
    raise ValueError("every 10.100.0.0/16 .. 10.199.0.0/16 range is in use on this machine")


def pod_addresses(pod_cidr: str) -> list[str]:
    """Addresses a node hands to pods: its /24 without the network and broadcast addresses."""
    return [str(host) for host in ipaddress.IPv4Network(pod_cidr).hosts()]
