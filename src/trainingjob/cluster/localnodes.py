"""Local process nodes as components of a cluster: their configuration, start, health and stop.

Each node `tj-local-<i>` is one node-agent process (`python -m trainingjob.node`), managed like the control
plane's components: a pid in state.json, a log in logs/<node>.log, a health check on its HTTPS endpoint. Its
state (pods, addresses) lives in nodes/<node>/ of the cluster. Run as root, the cluster gets its own bridge and
subnet and each node an address on it; otherwise nodes listen on 127.0.0.1 and run pods without namespaces.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from trainingjob.cluster.components import HealthCheck, Layout
from trainingjob.cluster.paths import cluster_dir
from trainingjob.node.config import KUBELET_PORT, NodeConfig
from trainingjob.node.devices.exporter import EXPORTER_PORT
from trainingjob.node.network.netplan import PodNetwork

NODE_PREFIX = "tj-local-"


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(count)]


def can_isolate() -> bool:
    """Namespaces, mounts and the bridge need root. TJ_LOCAL_NODE_ISOLATION=off runs nodes as without root (for
    trying, and testing, the fallback on a machine where one is root)."""
    return os.geteuid() == 0 and os.environ.get("TJ_LOCAL_NODE_ISOLATION", "on").lower() != "off"


def node_address(network: PodNetwork | None, index: int) -> str:
    return network.node_ip(index) if network else "127.0.0.1"


def node_port(network: PodNetwork | None, ports: dict[str, int], name: str) -> int:
    return KUBELET_PORT if network else ports[name]


def gpu_metrics_port_name(name: str) -> str:
    return f"{name}-gpu-metrics"


def node_config(
    name: str,
    index: int,
    cluster: str,
    layout: Layout,
    network: PodNetwork | None,
    images_file: str,
    kubernetes_version: str,
    gpus: str = "auto",
) -> NodeConfig:
    """`gpus`: auto (the machine's NVIDIA GPUs, if any), none, or fake:N (devices/gpus.py)."""
    pki = layout.pki
    cert, key = layout.cert(f"node-{name}")
    serving_cert, serving_key = layout.cert(f"node-{name}-serving")
    return NodeConfig(
        name=name,
        index=index,
        cluster=cluster,
        state_dir=str(layout.root / "nodes" / name),
        server=layout.apiserver_url,
        ca_file=str(pki / "ca.crt"),
        cert_file=cert,
        key_file=key,
        serving_cert_file=serving_cert,
        serving_key_file=serving_key,
        node_ip=node_address(network, index),
        port=node_port(network, layout.ports, name),
        apiserver_host=network.gateway if network else "127.0.0.1",
        apiserver_port=layout.ports["kube-apiserver"],
        images_file=images_file,
        kubernetes_version=kubernetes_version,
        isolate=network is not None,
        network=network.to_dict() if network else None,
        pod_cidr=network.pod_cidr(index) if network else None,
        gpus=gpus,
        # With an address of its own a node serves GPU metrics on dcgm-exporter's port; on 127.0.0.1 on its own.
        gpu_metrics_port=EXPORTER_PORT if network else layout.ports.get(gpu_metrics_port_name(name), EXPORTER_PORT),
    )


def config_path(cluster: str, name: str) -> Path:
    return cluster_dir(cluster) / "nodes" / name / "config.json"


def agent_command(cluster: str, name: str) -> list[str]:
    return [sys.executable, "-m", "trainingjob.node", "--config", str(config_path(cluster, name))]


def health_check(config: NodeConfig, layout: Layout) -> HealthCheck:
    return HealthCheck(f"https://{config.node_ip}:{config.port}/healthz", client_cert=str(layout.pki / "admin"))
