"""The webhooks' TLS and registration as pure decisions: when certificates are issued and rotated (tls.advance, with
the clock as an argument), which certificates one CA issues (certs.py), and how clientConfigs are compared and
patched (registration.py). The live rotation and take-over are in tests/integration/test_webhook_registration.py."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509

from trainingjob import certs
from trainingjob.api import webhook_config as w
from trainingjob.api.times import format_time
from trainingjob.webhooks.component import WebhookSettings
from trainingjob.webhooks.registration import TARGETS, same_target, with_nulls
from trainingjob.webhooks.tls import Rotation, ServingNames, WebhookTls, advance

NAMES = WebhookSettings(namespace="trainingjob-system").serving_names()
SHORT = Rotation(ca_validity=datetime.timedelta(hours=3), cert_validity=datetime.timedelta(hours=1))
START = datetime.datetime.now(datetime.UTC)


def later(**delta: float) -> datetime.datetime:
    return START + datetime.timedelta(**delta)


def test_a_first_start_makes_a_ca_and_a_certificate_for_every_name() -> None:
    state = advance(None, NAMES, SHORT, START, bundle_served=False)
    leaf = state.serving.certificate
    leaf.verify_directly_issued_by(state.ca.certificate)
    alt = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "trainingjob-operator.trainingjob-system.svc" in alt.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in alt.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert state.bundle == state.ca.cert_pem and state.next_ca is None
    assert WebhookTls.from_data(state.to_data()) == state


def test_nothing_changes_while_nothing_is_due() -> None:
    state = advance(None, NAMES, SHORT, START, bundle_served=True)
    assert advance(state, NAMES, SHORT, later(minutes=30), bundle_served=True) is state


def test_the_certificate_is_renewed_by_the_same_ca_when_a_third_of_its_life_is_left() -> None:
    state = advance(None, NAMES, SHORT, START, bundle_served=True)
    renewed = advance(state, NAMES, SHORT, later(minutes=45), bundle_served=True)
    assert renewed.serving != state.serving and renewed.ca == state.ca and renewed.bundle == state.bundle


def test_new_names_get_a_new_certificate_at_once() -> None:
    state = advance(None, NAMES, SHORT, START, bundle_served=True)
    wider = ServingNames((*NAMES.dns_names, "operator.example.com"), NAMES.ip_addresses)
    assert advance(state, wider, SHORT, START, bundle_served=True).serving != state.serving


def test_a_new_ca_is_trusted_before_it_signs_and_the_old_one_until_it_expires() -> None:
    state = advance(None, NAMES, SHORT, START, bundle_served=True)
    announced = advance(state, NAMES, SHORT, later(hours=2, minutes=1), bundle_served=True)
    assert announced.next_ca is not None and announced.ca == state.ca, "announced, not signing yet"
    assert len(certs.split_bundle(announced.bundle)) == 2
    waiting = advance(announced, NAMES, SHORT, later(hours=2, minutes=2), bundle_served=False)
    assert waiting.ca == state.ca, "the API server may not trust the new CA yet"
    promoted = advance(waiting, NAMES, SHORT, later(hours=2, minutes=3), bundle_served=True)
    assert promoted.ca == announced.next_ca and promoted.next_ca is None
    promoted.serving.certificate.verify_directly_issued_by(promoted.ca.certificate)
    assert len(certs.split_bundle(promoted.bundle)) == 2, "the old CA stays trusted until it expires"
    expired = advance(promoted, NAMES, SHORT, later(hours=3, minutes=10), bundle_served=True)
    assert certs.split_bundle(expired.bundle) == [promoted.ca.cert_pem]


def test_the_admission_key_records_when_stamping_began_and_keeps_it() -> None:
    """reconcile/admission.py admits a job without a stamp only if it was created before then; a key an older
    operator made (without the date) counts from when this one first reads it."""
    state = advance(None, NAMES, SHORT, START, bundle_served=True)
    assert state.admission_key and state.admission_since == format_time(START)
    assert WebhookTls.from_data(state.to_data()) == state
    assert advance(state, NAMES, SHORT, later(minutes=30), bundle_served=True).admission_since == state.admission_since
    older = WebhookTls.from_data({k: v for k, v in state.to_data().items() if k != "admission.since"})
    assert older is not None and older.admission_since == ""
    upgraded = advance(older, NAMES, SHORT, later(minutes=30), bundle_served=True)
    assert upgraded.admission_key == state.admission_key and upgraded.admission_since == format_time(later(minutes=30))


def test_a_certificate_never_outlives_its_ca() -> None:
    ca = certs.new_ca("ca", datetime.timedelta(hours=1))
    leaf = certs.issue(ca, certs.Leaf("x", server=True, dns_names=("x",)), datetime.timedelta(days=30))
    assert leaf.certificate.not_valid_after_utc == ca.certificate.not_valid_after_utc


def test_the_settings_name_the_url_host_too() -> None:
    names = WebhookSettings(url="https://operator.example.com:9443").serving_names()
    assert "operator.example.com" in names.dns_names
    assert "10.1.2.3" in WebhookSettings(url="https://10.1.2.3:9443").serving_names().ip_addresses


@pytest.mark.parametrize(
    ("current", "desired", "same"),
    [
        ({"url": "https://127.0.0.1:9443/convert"}, {"url": "https://127.0.0.1:9443/convert", "caBundle": "x"}, True),
        ({"url": "https://127.0.0.1:9443/convert"}, {"url": "https://127.0.0.1:9444/convert"}, False),
        ({"service": {"name": "a"}}, {"url": "https://127.0.0.1:9443/convert"}, False),
        ({"service": {"name": "a", "port": 443}}, {"service": {"name": "a", "port": 443}}, True),
    ],
)
def test_targets_are_the_same_server_whatever_the_ca(current: dict, desired: dict, same: bool) -> None:
    assert same_target(current, desired) is same


def test_patches_replace_the_whole_client_config_and_only_it() -> None:
    config = w.local_endpoint(9555).client_config(w.CONVERT_PATH, "Y2E=")
    assert with_nulls(config) == {"url": "https://127.0.0.1:9555/convert", "caBundle": "Y2E=", "service": None}
    document = {"metadata": {"resourceVersion": "7"}}
    crd, mutating, _ = TARGETS
    assert crd.patch(document, config) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": with_nulls(config)},
            }
        },
    }
    assert mutating.patch(document, config)["webhooks"] == [
        {"name": w.MUTATING_WEBHOOK, "clientConfig": with_nulls(config)}
    ]
