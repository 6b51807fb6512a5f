"""The webhook server's TLS: a self-signed CA and a serving certificate in one Secret, rotated before they expire.

Every replica reads the Secret and serves its certificate; the first one creates it, and any one may rotate it
(writes carry the resourceVersion, so two replicas never both rotate). The API server trusts the CA because the
operator injects `ca-bundle.crt` into the CRD's conversion and the webhook configurations (registration.py).

Rotation never leaves the API server without a trusted certificate:
- the serving certificate is renewed, by the same CA, when a third of its lifetime remains;
- a CA due for renewal gets a successor, which joins the bundle first and signs the serving certificate only once
  the API server's objects carry that bundle (`bundle_served`); a retired CA stays in the bundle until it expires.

The same Secret holds the key the admission stamp is signed with (reconcile/admission.py): every replica signs
and verifies with it, and it outlives restarts. A Secret written before it existed gets one on the next check.

advance() decides all of this from the Secret's content and the time, without I/O; SecretStore reads and writes.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import secrets
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob import certs
from trainingjob.api.times import format_time
from trainingjob.config import CA_VALIDITY, CERT_VALIDITY

SECRET_NAME = "trainingjob-webhook-tls"
CA_NAME = "trainingjob-webhook-ca"


@dataclass(frozen=True)
class Rotation:
    ca_validity: datetime.timedelta = CA_VALIDITY
    cert_validity: datetime.timedelta = CERT_VALIDITY
    # Renew when less than this fraction of a certificate's lifetime remains.
    renew_fraction: float = 1 / 3


@dataclass(frozen=True)
class ServingNames:
    """Names the serving certificate must cover: the Service's DNS names and the addresses it is reached at."""

    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]


@dataclass(frozen=True)
class WebhookTls:
    ca: certs.Pair  # signs the serving certificate
    serving: certs.Pair
    bundle: str  # every CA the API server should trust: ca, a successor, a retired one not yet expired
    next_ca: certs.Pair | None = None  # a successor already in the bundle, waiting to take over
    admission_key: str = ""  # hex; signs admission stamps (reconcile/admission.py)
    admission_since: str = ""  # RFC 3339: when this cluster's operators began stamping (reconcile/admission.py)

    def to_data(self) -> dict[str, str]:
        data = {
            "ca.crt": self.ca.cert_pem,
            "ca.key": self.ca.key_pem,
            "tls.crt": self.serving.cert_pem,
            "tls.key": self.serving.key_pem,
            "ca-bundle.crt": self.bundle,
        }
        if self.next_ca is not None:
            data.update({"next-ca.crt": self.next_ca.cert_pem, "next-ca.key": self.next_ca.key_pem})
        if self.admission_key:
            data["admission.key"] = self.admission_key
        if self.admission_since:
            data["admission.since"] = self.admission_since
        return data

    @classmethod
    def from_data(cls, data: dict[str, str]) -> WebhookTls | None:
        needed = ("ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt")
        if not all(data.get(key) for key in needed):
            return None
        successor = None
        if data.get("next-ca.crt") and data.get("next-ca.key"):
            successor = certs.Pair(data["next-ca.crt"], data["next-ca.key"])
        return cls(
            certs.Pair(data["ca.crt"], data["ca.key"]),
            certs.Pair(data["tls.crt"], data["tls.key"]),
            data["ca-bundle.crt"],
            successor,
            data.get("admission.key", ""),
            data.get("admission.since", ""),
        )


def _due_at(pem: str, fraction: float) -> datetime.datetime:
    """When less than `fraction` of the validity it was made with is left (the back-dating is not part of it)."""
    start, end = certs.not_before(pem) + certs.CLOCK_SKEW, certs.not_after(pem)
    return end - max(end - start, datetime.timedelta(0)) * fraction


def _due(pem: str, now: datetime.datetime, fraction: float) -> bool:
    return now >= _due_at(pem, fraction)


def next_change(state: WebhookTls, rotation: Rotation) -> datetime.datetime:
    """The earliest time advance() would change `state` for the time alone: the serving certificate or the CA due
    for renewal, or a CA of the bundle expiring (it leaves the bundle). The upkeep sleeps until then instead of
    looking every few seconds; what else changes it (another replica's write, a successor CA the API server now
    trusts) comes by the Secret's watch and the registration."""
    times = [_due_at(state.serving.cert_pem, rotation.renew_fraction)]
    if state.next_ca is None:
        times.append(_due_at(state.ca.cert_pem, rotation.renew_fraction))
    times += [certs.not_after(pem) for pem in certs.split_bundle(state.bundle)]
    return min(times)


def _covers(pem: str, names: ServingNames) -> bool:
    cert = x509.load_pem_x509_certificate(pem.encode())
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    ips = {ipaddress.ip_address(ip) for ip in names.ip_addresses}
    return set(names.dns_names) <= set(alt.get_values_for_type(x509.DNSName)) and ips <= set(
        alt.get_values_for_type(x509.IPAddress)
    )


def _signed_by(pem: str, ca: certs.Pair) -> bool:
    try:
        x509.load_pem_x509_certificate(pem.encode()).verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _serving(ca: certs.Pair, names: ServingNames, rotation: Rotation, now: datetime.datetime) -> certs.Pair:
    leaf = certs.Leaf(names.dns_names[0], server=True, dns_names=names.dns_names, ip_addresses=names.ip_addresses)
    return certs.issue(ca, leaf, rotation.cert_validity, now)


def _bundle(*cas: str, now: datetime.datetime) -> str:
    """Unexpired CAs, each once, in the order given."""
    seen: list[str] = []
    for pem in cas:
        if pem not in seen and certs.not_after(pem) > now:
            seen.append(pem)
    return "".join(seen)


def new_admission_key() -> str:
    return secrets.token_hex(32)


def advance(
    state: WebhookTls | None,
    names: ServingNames,
    rotation: Rotation,
    now: datetime.datetime,
    bundle_served: bool,
) -> WebhookTls:
    """The TLS state to use now; equal to `state` when nothing is due."""
    if state is None:
        ca = certs.new_ca(CA_NAME, rotation.ca_validity, now)
        serving = _serving(ca, names, rotation, now)
        return WebhookTls(ca, serving, ca.cert_pem, admission_key=new_admission_key(), admission_since=format_time(now))
    ca, serving, successor = state.ca, state.serving, state.next_ca
    if successor is not None and bundle_served:
        ca, successor = successor, None  # the API server trusts it now: let it sign
    elif successor is None and _due(ca.cert_pem, now, rotation.renew_fraction):
        successor = certs.new_ca(CA_NAME, rotation.ca_validity, now)  # announce it first
    retired = certs.split_bundle(state.bundle)
    bundle = _bundle(*retired, ca.cert_pem, *([successor.cert_pem] if successor else []), now=now)
    if (
        _due(serving.cert_pem, now, rotation.renew_fraction)
        or not _covers(serving.cert_pem, names)
        or not _signed_by(serving.cert_pem, ca)
    ):
        serving = _serving(ca, names, rotation, now)
    key = state.admission_key or new_admission_key()
    # A key from before `since` was kept (an older operator): stamping counts from now, when it is first read.
    since = state.admission_since if state.admission_key else ""
    since = since or format_time(now)
    updated = replace(
        state, ca=ca, serving=serving, bundle=bundle, next_ca=successor, admission_key=key, admission_since=since
    )
    return state if updated == state else updated


class SecretStore:
    """The Secret holding WebhookTls, read and written with resourceVersion preconditions."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str = SECRET_NAME) -> None:
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.name = name

    async def read(self) -> tuple[WebhookTls | None, str | None]:
        """(content, resourceVersion); (None, None) when the Secret does not exist."""
        try:
            secret = await self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None, None
            raise
        data = {key: base64.b64decode(value).decode() for key, value in (secret.data or {}).items()}
        return WebhookTls.from_data(data), secret.metadata.resource_version

    async def write(self, tls: WebhookTls, resource_version: str | None) -> bool:
        """Create (no resourceVersion) or replace the Secret; False when someone else wrote first."""
        metadata = client.V1ObjectMeta(
            name=self.name, labels={"app.kubernetes.io/name": "trainingjob-operator"}, resource_version=resource_version
        )
        body = client.V1Secret(metadata=metadata, type="Opaque", string_data=tls.to_data())
        try:
            if resource_version is None:
                await self.core.create_namespaced_secret(self.namespace, body)
            else:
                await self.core.replace_namespaced_secret(self.name, self.namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True
