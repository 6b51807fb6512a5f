"""The one place that makes x509 certificates: certificate authorities and the certificates they sign.

Used by the local cluster's PKI (cluster/pki.py, files on disk), the progress endpoint (progress/tls.py) and the
webhook server (webhooks/tls.py, a rotating CA in a Secret). Keys are ECDSA P-256. A certificate is valid from five
minutes before it is made (a clock a little behind still accepts it) for the validity asked, from when it is made.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLOCK_SKEW = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Leaf:
    """What one certificate is for: its subject, its usages and the names it serves."""

    common_name: str
    organizations: tuple[str, ...] = ()
    server: bool = False
    client: bool = False
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pair:
    """A certificate and its private key, as PEM text (what Secrets, files and ssl want)."""

    cert_pem: str
    key_pem: str

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())

    @property
    def key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key


def name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def key_pem(key: object) -> str:
    return key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _now(now: datetime.datetime | None) -> datetime.datetime:
    return now or datetime.datetime.now(datetime.UTC)


def _key_usage(*, signs: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=signs,
        crl_sign=signs,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )


def new_ca(common_name: str, validity: datetime.timedelta, now: datetime.datetime | None = None) -> Pair:
    """A self-signed CA that may sign leaf certificates, valid from `now` (default: the clock's)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = name(common_name)
    start = _now(now)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - CLOCK_SKEW)
        .not_valid_after(start + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(signs=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Pair(cert_pem(cert), key_pem(key))


def issue(ca: Pair, leaf: Leaf, validity: datetime.timedelta, now: datetime.datetime | None = None) -> Pair:
    """A certificate for `leaf`, signed by `ca` (never outliving it), valid from `now` (default: the clock's)."""
    ca_cert, ca_key = ca.certificate, ca.key
    key = ec.generate_private_key(ec.SECP256R1())
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if leaf.server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if leaf.client else []
    )
    start = _now(now)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name(leaf.common_name, leaf.organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - CLOCK_SKEW)
        .not_valid_after(min(start + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in leaf.dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in leaf.ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return Pair(cert_pem(builder.sign(ca_key, hashes.SHA256())), key_pem(key))


def not_after(pem: str) -> datetime.datetime:
    return x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc


def not_before(pem: str) -> datetime.datetime:
    return x509.load_pem_x509_certificate(pem.encode()).not_valid_before_utc


def split_bundle(bundle: str) -> list[str]:
    """The PEM certificates of a bundle, each with its END line."""
    marker = "-----END CERTIFICATE-----"
    return [part.strip() + "\n" + marker + "\n" for part in bundle.split(marker) if part.strip()]
