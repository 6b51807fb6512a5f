"""The endpoint's TLS identity, shared by every replica through one Secret in the operator's namespace.

The first replica creates a CA and a serving certificate; the others read them. Workers trust the CA because the
operator puts it in each job's ConfigMap (progress-ca.crt), so no cluster-wide trust setup is needed.

The certificate names the Service and 127.0.0.1, plus the IP address of --progress-url when it is one: an operator
run outside the cluster is reached by workers at an address (on the local cluster, the pod network's gateway), and
a worker checks the certificate against the address it connected to.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography import x509
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob import certs

logger = logging.getLogger(__name__)
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


def url_ips(url: str | None) -> list[str]:
    """The IP address a progress URL names, if it names one (a host name is covered by the Service's names)."""
    host = urlsplit(url or "").hostname
    try:
        return [str(ipaddress.ip_address(host or ""))]
    except ValueError:
        return []


def certificate_ips(cert_pem: str) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


async def ensure_tls(api: client.ApiClient, namespace: str, service: str, ips: Iterable[str] = ()) -> TlsMaterial:
    """Read the shared Secret, or create it for the Service's names, 127.0.0.1 and `ips`; when two replicas race,
    the loser reads the winner's."""
    core = client.CoreV1Api(api)
    wanted = ["127.0.0.1", *(ip for ip in ips if ip != "127.0.0.1")]
    for _ in range(3):
        try:
            secret = await core.read_namespaced_secret(SECRET_NAME, namespace)
            data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
            missing = set(wanted) - certificate_ips(data["tls.crt"])
            if missing:
                logger.warning(
                    "the progress certificate in Secret %s/%s does not name %s: workers reaching the endpoint "
                    "there will refuse it; delete the Secret to have it issued again",
                    namespace,
                    SECRET_NAME,
                    ", ".join(sorted(missing)),
                )
            return TlsMaterial(data["ca.crt"], data["tls.crt"], data["tls.key"])
        except ApiException as error:
            if error.status != 404:
                raise
        material = generate(service_names(namespace, service), wanted)
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
