"""The endpoint's TLS identity, shared by every replica through one Secret in the operator's namespace.

The first replica creates a CA and a serving certificate; the others read them. Workers trust the CA because the
operator puts it in each job's ConfigMap (progress-ca.crt), so no cluster-wide trust setup is needed.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

SECRET_NAME = "trainingjob-progress-tls"
VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: str
    cert_pem: str
    key_pem: str


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def generate(dns_names: list[str], ips: list[str]) -> TlsMaterial:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainingjob-progress-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    encode = serialization.Encoding.PEM
    return TlsMaterial(ca.public_bytes(encode).decode(), cert.public_bytes(encode).decode(), _pem(key).decode())


def service_names(namespace: str, service: str) -> list[str]:
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
        "localhost",
    ]


async def ensure_tls(api: client.ApiClient, namespace: str, service: str) -> TlsMaterial:
    """Read the shared Secret, or create it; when two replicas race, the loser reads the winner's."""
    core = client.CoreV1Api(api)
    for _ in range(3):
        try:
            secret = await core.read_namespaced_secret(SECRET_NAME, namespace)
            data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
            return TlsMaterial(data["ca.crt"], data["tls.crt"], data["tls.key"])
        except ApiException as error:
            if error.status != 404:
                raise
        material = generate(service_names(namespace, service), ["127.0.0.1"])
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=SECRET_NAME, labels={"app.kubernetes.io/name": "trainingjob-operator"}),
            type="kubernetes.io/tls",
            string_data={"ca.crt": material.ca_pem, "tls.crt": material.cert_pem, "tls.key": material.key_pem},
        )
        try:
            await core.create_namespaced_secret(namespace, body)
            return material
        except ApiException as error:
            if error.status != 409:
                raise
    raise RuntimeError(f"could not read or create Secret {namespace}/{SECRET_NAME}")
