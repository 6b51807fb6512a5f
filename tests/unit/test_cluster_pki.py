"""Each cluster's CA signs certificates with the identities and names the components rely on."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from trainingjob.cluster.pki import create_cluster_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    create_cluster_pki(directory, "unit", "10.0.0.1")
    return directory


def load(pki: Path, stem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((pki / f"{stem}.crt").read_bytes())


@pytest.mark.parametrize(
    "stem",
    [
        "etcd-server",
        "apiserver",
        "apiserver-etcd-client",
        "admin",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    ],
)
def test_certificate_is_signed_by_the_cluster_ca(pki: Path, stem: str) -> None:
    ca = load(pki, "ca")
    cert = load(pki, stem)
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert (pki / f"{stem}.key").stat().st_mode & 0o077 == 0


def test_apiserver_certificate_serves_loopback_and_in_cluster_names(pki: Path) -> None:
    names = load(pki, "apiserver").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "kubernetes.default.svc"} <= set(names.get_values_for_type(x509.DNSName))
    assert {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.1")} <= set(
        names.get_values_for_type(x509.IPAddress)
    )


@pytest.mark.parametrize(
    ("stem", "user", "groups"),
    [
        ("admin", "admin", ["system:masters"]),
        ("kube-controller-manager", "system:kube-controller-manager", []),
        ("kube-scheduler", "system:kube-scheduler", []),
    ],
)
def test_client_certificates_carry_kubernetes_identities(pki: Path, stem: str, user: str, groups: list) -> None:
    cert = load(pki, stem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == groups
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_ca_is_a_ca_and_service_account_keys_exist(pki: Path) -> None:
    constraints = load(pki, "ca").extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca is True
    assert isinstance(load(pki, "admin").public_key(), ec.EllipticCurvePublicKey)
    assert b"BEGIN PUBLIC KEY" in (pki / "sa.pub").read_bytes()


def test_front_proxy_client_is_signed_by_a_ca_of_its_own(pki: Path) -> None:
    """A certificate the front-proxy CA signs may assert any user in request headers: no other must verify."""
    client = load(pki, "front-proxy-client")
    client.verify_directly_issued_by(load(pki, "front-proxy-ca"))
    assert client.issuer != load(pki, "ca").subject
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "front-proxy-client"
