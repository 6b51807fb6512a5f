"""One node agent's settings, written by `tj cluster up` into the node's state directory (nodes/<name>/config.json).

A file rather than flags: the agent is restarted by `tj cluster up` after a crash, and must come back with exactly
the identity, addresses and directories it had, so that it can find and adopt its running pods.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from trainingjob.node.api.client import Credentials
from trainingjob.node.network.netplan import PodNetwork

NODE_LABEL = "ml.example.com/node-runtime"
NODE_LABEL_VALUE = "process"
NODE_TAINT = {"key": NODE_LABEL, "value": NODE_LABEL_VALUE, "effect": "NoSchedule"}
CLUSTER_DOMAIN = "cluster.local"
KUBELET_PORT = 10250


@dataclass
class NodeConfig:
    name: str
    index: int
    cluster: str
    state_dir: str
    server: str
    ca_file: str
    cert_file: str
    key_file: str
    serving_cert_file: str
    serving_key_file: str
    node_ip: str
    port: int
    # Where pods reach the API server: KUBERNETES_SERVICE_HOST/PORT.
    apiserver_host: str
    apiserver_port: int
    images_file: str
    kubernetes_version: str
    # Root: pods in their own namespaces on the cluster's bridge, the node serving DNS on node_ip:53.
    isolate: bool
    network: dict[str, str] | None = None
    pod_cidr: str | None = None
    # GPUs (devices/gpus.py): auto (NVML's, when there are any), none, or fake:N (labelled fake devices for tests).
    gpus: str = "auto"
    # Where the node's DCGM-style GPU metrics are served (devices/exporter.py; 9400 on a node address of its own).
    gpu_metrics_port: int = 9400

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.server, self.ca_file, self.cert_file, self.key_file)

    @property
    def pod_network(self) -> PodNetwork | None:
        return PodNetwork.from_dict(self.network) if self.network else None

    @property
    def root(self) -> Path:
        return Path(self.state_dir)

    @property
    def pods_dir(self) -> Path:
        return self.root / "pods"

    def save(self) -> Path:
        path = self.root / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def load(cls, path: Path) -> NodeConfig:
        """Keys this version does not know (written by another one) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(path.read_text()).items() if k in known})
