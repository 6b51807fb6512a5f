"""A certificate authority per cluster and the certificates every component needs (TLS everywhere).

Why per cluster: a cluster's trust must end with it. `tj cluster down` removes the CA with the state, so a
kubeconfig from an old cluster can never talk to a new one.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
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
        CertSpec("admin", "admin", organizations=("system:masters",), client=True),
        CertSpec("kube-controller-manager", "system:kube-controller-manager", client=True),
        CertSpec("kube-scheduler", "system:kube-scheduler", client=True),
        # kwok plays every kubelet of the fake nodes (node, pod and lease status across all nodes), which no
        # built-in role covers; it is a local simulator, so it gets the admin group.
        CertSpec("kwok", "kwok", organizations=("system:masters",), client=True),
        *(spec for name, address in nodes for spec in node_cert_specs(name, address)),
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)


def create_ca(directory: Path, cluster_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"trainingjob-local-ca-{cluster_name}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    (directory / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(directory / "ca.key", key)
    return cert, key


def issue_certificate(
    directory: Path, spec: CertSpec, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
) -> None:
    """Sign `<stem>.crt`/`<stem>.key` for one component."""
    key = ec.generate_private_key(ec.SECP256R1())
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if spec.server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if spec.client else []
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(spec.common_name, spec.organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now())
        .not_valid_after(_now() + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in spec.dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in spec.ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    (directory / f"{spec.file_stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(directory / f"{spec.file_stem}.key", key)


def create_service_account_keys(directory: Path) -> None:
    """The key pair kube-apiserver signs ServiceAccount tokens with (and verifies them against)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(directory / "sa.key", key)
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
    ca_cert, ca_key = create_ca(directory, cluster_name)
    for spec in cluster_cert_specs(service_ip, apiserver_ips, nodes):
        issue_certificate(directory, spec, ca_cert, ca_key)
    create_service_account_keys(directory)
