"""A certificate authority per cluster and the certificates every component needs (TLS everywhere).

Why per cluster: a cluster's trust must end with it. `tj cluster down` removes the CA with the state, so a
kubeconfig from an old cluster can never talk to a new one.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from trainingjob import certs

VALIDITY = datetime.timedelta(days=365)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
FRONT_PROXY_CA = "front-proxy-ca"
FRONT_PROXY_CLIENT = "front-proxy-client"
# The API server's identity towards admission webhooks (cluster/webhook_client.py).
WEBHOOK_CLIENT_STEM = "apiserver-webhook-client"
WEBHOOK_CLIENT_NAME = "kube-apiserver-webhook-client"
APISERVER_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class CertSpec:
    """What one certificate is for: its subject, its usages and the names it serves."""

    file_stem: str
    common_name: str
    organizations: tuple[str, ...] = ()
    server: bool = False
    client: bool = False
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()

    @property
    def leaf(self) -> certs.Leaf:
        return certs.Leaf(
            self.common_name, self.organizations, self.server, self.client, self.dns_names, self.ip_addresses
        )


def node_cert_specs(name: str, address: str) -> tuple[CertSpec, ...]:
    """A local node's identities: its client certificate in `system:nodes` (so the Node authorizer and the
    NodeRestriction admission plugin treat it as the kubelet of `name`) and the serving certificate of its log
    endpoint, for the address the API server dials."""
    return (
        CertSpec(f"node-{name}", f"system:node:{name}", organizations=("system:nodes",), client=True),
        CertSpec(
            f"node-{name}-serving", f"system:node:{name}", server=True, dns_names=(name,), ip_addresses=(address,)
        ),
    )


def cluster_cert_specs(
    service_ip: str, apiserver_ips: tuple[str, ...] = (), nodes: tuple[tuple[str, str], ...] = ()
) -> tuple[CertSpec, ...]:
    """Every certificate of a local cluster; client identities map to Kubernetes users/groups via CN/O.

    `apiserver_ips`: more addresses the API server is reached at (the pod network's gateway); `nodes`: (name,
    address) of each local process node."""
    return (
        CertSpec(
            "etcd-server",
            "etcd",
            server=True,
            client=True,
            dns_names=LOOPBACK_NAMES,
            ip_addresses=LOOPBACK_IPS,
        ),
        CertSpec(
            "apiserver",
            "kube-apiserver",
            server=True,
            dns_names=LOOPBACK_NAMES + APISERVER_NAMES,
            ip_addresses=(*LOOPBACK_IPS, service_ip, *apiserver_ips),
        ),
        # How the API server authenticates to nodes' log endpoints (`kubectl logs`), bound to
        # system:kubelet-api-admin by the cluster's bootstrap objects.
        CertSpec("apiserver-kubelet-client", "kube-apiserver-kubelet-client", client=True),
        CertSpec("apiserver-etcd-client", "kube-apiserver-etcd-client", client=True),
        # How the API server authenticates to admission webhooks (cluster/webhook_client.py); bound to nothing.
        CertSpec(WEBHOOK_CLIENT_STEM, WEBHOOK_CLIENT_NAME, client=True),
        CertSpec("admin", "admin", organizations=("system:masters",), client=True),
        CertSpec("kube-controller-manager", "system:kube-controller-manager", client=True),
        CertSpec("kube-scheduler", "system:kube-scheduler", client=True),
        # kwok plays every kubelet of the fake nodes (node, pod and lease status across all nodes), which no
        # built-in role covers; it is a local simulator, so it gets the admin group.
        CertSpec("kwok", "kwok", organizations=("system:masters",), client=True),
        *(spec for name, address in nodes for spec in node_cert_specs(name, address)),
    )


def _write(directory: Path, stem: str, pair: certs.Pair) -> None:
    (directory / f"{stem}.crt").write_text(pair.cert_pem)
    key_path = directory / f"{stem}.key"
    key_path.write_text(pair.key_pem)
    key_path.chmod(0o600)


def create_ca(directory: Path, cluster_name: str) -> certs.Pair:
    ca = certs.new_ca(f"trainingjob-local-ca-{cluster_name}", VALIDITY)
    _write(directory, "ca", ca)
    return ca


def issue_certificate(directory: Path, spec: CertSpec, ca: certs.Pair) -> None:
    """Sign `<stem>.crt`/`<stem>.key` for one component."""
    _write(directory, spec.file_stem, certs.issue(ca, spec.leaf, VALIDITY))


def create_front_proxy_pki(directory: Path, cluster_name: str) -> None:
    """The aggregation layer's own CA and the client certificate the API server proxies aggregated APIs with (Kueue's
    visibility API), as kubeadm sets them up. A CA of its own: a certificate it signs asserts any user through request
    headers, so no other client certificate of the cluster may be able to."""
    ca = certs.new_ca(f"trainingjob-local-front-proxy-ca-{cluster_name}", VALIDITY)
    _write(directory, FRONT_PROXY_CA, ca)
    issue_certificate(directory, CertSpec(FRONT_PROXY_CLIENT, FRONT_PROXY_CLIENT, client=True), ca)


def load_ca(directory: Path) -> certs.Pair:
    """The cluster CA written by create_cluster_pki (to sign certificates of components started later)."""
    return certs.Pair((directory / "ca.crt").read_text(), (directory / "ca.key").read_text())


def create_service_account_keys(directory: Path) -> None:
    """The key pair kube-apiserver signs ServiceAccount tokens with (and verifies them against)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_text(certs.key_pem(key))
    (directory / "sa.key").chmod(0o600)
    (directory / "sa.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def create_cluster_pki(
    directory: Path,
    cluster_name: str,
    service_ip: str,
    apiserver_ips: tuple[str, ...] = (),
    nodes: tuple[tuple[str, str], ...] = (),
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ca = create_ca(directory, cluster_name)
    for spec in cluster_cert_specs(service_ip, apiserver_ips, nodes):
        issue_certificate(directory, spec, ca)
    create_front_proxy_pki(directory, cluster_name)
    create_service_account_keys(directory)
