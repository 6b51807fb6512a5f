"""A certificate authority per cluster and the certificates every component needs (TLS everywhere).

Why per cluster: a cluster's trust must end with it. `tj cluster down` removes the CA with the state, so a
kubeconfig from an old cluster can never talk to a new one.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from trainingjob import certs

VALIDITY = datetime.timedelta(days=365)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
APISERVER_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def cluster_cert_specs(service_ip: str) -> dict[str, certs.Leaf]:
    """Every certificate of a local cluster by file stem; client identities map to Kubernetes users/groups via
    CN/O."""
    return {
        "etcd-server": certs.Leaf(
            "etcd", server=True, client=True, dns_names=LOOPBACK_NAMES, ip_addresses=LOOPBACK_IPS
        ),
        "apiserver": certs.Leaf(
            "kube-apiserver",
            server=True,
            dns_names=LOOPBACK_NAMES + APISERVER_NAMES,
            ip_addresses=(*LOOPBACK_IPS, service_ip),
        ),
        "apiserver-etcd-client": certs.Leaf("kube-apiserver-etcd-client", client=True),
        "admin": certs.Leaf("admin", organizations=("system:masters",), client=True),
        "kube-controller-manager": certs.Leaf("system:kube-controller-manager", client=True),
        "kube-scheduler": certs.Leaf("system:kube-scheduler", client=True),
        # kwok plays every kubelet of the fake nodes (node, pod and lease status across all nodes), which no
        # built-in role covers; it is a local simulator, so it gets the admin group.
        "kwok": certs.Leaf("kwok", organizations=("system:masters",), client=True),
    }


def _write(directory: Path, stem: str, pair: certs.Pair) -> None:
    (directory / f"{stem}.crt").write_text(pair.cert_pem)
    key_path = directory / f"{stem}.key"
    key_path.write_text(pair.key_pem)
    key_path.chmod(0o600)


def create_ca(directory: Path, cluster_name: str) -> certs.Pair:
    ca = certs.new_ca(f"trainingjob-local-ca-{cluster_name}", VALIDITY)
    _write(directory, "ca", ca)
    return ca


def issue_certificate(directory: Path, stem: str, leaf: certs.Leaf, ca: certs.Pair) -> None:
    """Sign `<stem>.crt`/`<stem>.key` for one component."""
    _write(directory, stem, certs.issue(ca, leaf, VALIDITY))


def create_service_account_keys(directory: Path) -> None:
    """The key pair kube-apiserver signs ServiceAccount tokens with (and verifies them against)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_text(certs.key_pem(key))
    (directory / "sa.key").chmod(0o600)
    (directory / "sa.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def create_cluster_pki(directory: Path, cluster_name: str, service_ip: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ca = create_ca(directory, cluster_name)
    for stem, leaf in cluster_cert_specs(service_ip).items():
        issue_certificate(directory, stem, leaf, ca)
    create_service_account_keys(directory)
