"""The endpoint's TLS identity, shared by every replica through one Secret in the operator's namespace.

The first replica creates a CA and a serving certificate; the others read them. Workers trust the CA because the
operator puts it in each job's ConfigMap (progress-ca.crt), so no cluster-wide trust setup is needed.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob import certs

SECRET_NAME = "trainingjob-progress-tls"
VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class TlsMaterial:
    ca_pem: str
    cert_pem: str
    key_pem: str


def generate(dns_names: list[str], ips: list[str]) -> TlsMaterial:
    ca = certs.new_ca("trainingjob-progress-ca", VALIDITY)
    leaf = certs.issue(
        ca, certs.Leaf(dns_names[0], server=True, dns_names=tuple(dns_names), ip_addresses=tuple(ips)), VALIDITY
    )
    return TlsMaterial(ca.cert_pem, leaf.cert_pem, leaf.key_pem)


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
