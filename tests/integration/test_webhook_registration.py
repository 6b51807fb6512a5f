"""How the API server reaches the webhooks: the operator points the CRD's conversion and the webhook configurations at
itself with its CA, takes them back when deploy/crd/ is re-applied, hands them to another operator only when it is
gone, and rotates its certificates while conversions go on."""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import time
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.control_plane_faults import api_requests
from tests.integration.v1_support import create, kubectl, read, wait_state
from tests.jobs import job_manifest
from tests.kube import Kube, wait_until
from tests.operator_harness import OPERATOR_NAMESPACE, REPO, RunningOperator, start_operator
from trainingjob import certs
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.webhooks.tls import SECRET_NAME

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]


def client_configs(kube: Kube) -> dict[str, dict[str, Any]]:
    admission = client.AdmissionregistrationV1Api(kube.api)
    plain = kube.api.sanitize_for_serialization
    crd = plain(kube.extensions.read_custom_resource_definition(c.CRD_NAME))
    mutating = plain(admission.read_mutating_webhook_configuration(w.CONFIGURATION_NAME))
    validating = plain(admission.read_validating_webhook_configuration(w.CONFIGURATION_NAME))
    return {
        w.CONVERT_PATH: crd["spec"]["conversion"]["webhook"]["clientConfig"],
        w.MUTATE_PATH: mutating["webhooks"][0]["clientConfig"],
        w.VALIDATE_PATH: validating["webhooks"][0]["clientConfig"],
    }


def pointed_at(kube: Kube, port: int) -> bool:
    return all(config.get("url") == f"https://127.0.0.1:{port}{path}" for path, config in client_configs(kube).items())


def served_certificate(port: int, bundle: str) -> x509.Certificate:
    """The certificate the server on `port` presents, verified against `bundle` (the CA the API server got)."""
    context = ssl.create_default_context(cadata=bundle)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def converts(kube: Kube, namespace: str, name: str) -> bool:
    """A read through v1alpha1 (the conversion webhook) works; a transient 429 while the API server rebuilds the
    CRD's storage after a registration change is retried, as clients do."""
    for _ in range(20):
        try:
            return read(kube, namespace, name, c.V1ALPHA1) is not None
        except ApiException as error:
            if error.status != 429:
                return False
            time.sleep(0.5)
    return False


def become_session_operator(operator: RunningOperator, replacement: RunningOperator) -> None:
    for field in ("process", "log_path", "progress_port", "metrics_port", "webhook_port", "health_url"):
        setattr(operator, field, getattr(replacement, field))


def test_the_operator_points_the_api_server_at_itself_with_its_ca(kube: Kube, operator: RunningOperator) -> None:
    wait_until(lambda: pointed_at(kube, operator.webhook_port), 30, "the webhooks to point at the operator")
    bundles = {path: base64.b64decode(config["caBundle"]).decode() for path, config in client_configs(kube).items()}
    (bundle,) = set(bundles.values())
    served = served_certificate(operator.webhook_port, bundle)
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{w.SERVICE_NAME}.{OPERATOR_NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)


def test_re_applied_registration_is_pointed_back_within_seconds(
    cluster: ClusterUnderTest, kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create(kube, namespace, job_manifest("probe", complete_after=None))
    outcome = kubectl(cluster, "apply", "-f", str(REPO / "deploy" / "crd"))
    assert outcome.code == 0, outcome.err
    wait_until(lambda: pointed_at(kube, operator.webhook_port), 30, "the operator to point the webhooks back")
    wait_until(lambda: converts(kube, namespace, "probe"), 30, "v1alpha1 to be served again")


# What the webhooks' upkeep reads: the TLS Secret, the CRD and the two webhook configurations.
UPKEEP_RESOURCES = (
    "secrets",
    "customresourcedefinitions",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
)
IDLE_WINDOW = 12.0  # seconds: more than two rounds of the 5 s poll the upkeep once was


def upkeep_requests(operator: RunningOperator) -> float:
    """GETs (reads, lists and watches) the operator has made of the upkeep's objects so far."""
    counts = api_requests(operator)
    return sum(n for (verb, resource, _), n in counts.items() if verb == "get" and resource in UPKEEP_RESOURCES)


def test_an_overwritten_ca_bundle_is_put_back_at_once_and_nothing_is_polled_while_idle(
    kube: Kube, operator: RunningOperator
) -> None:
    """The upkeep watches its four objects: idle, it reads none of them (a watch renewal per object at most, every
    few minutes); a caBundle someone overwrites is put back as soon as the watch tells."""
    wait_until(lambda: pointed_at(kube, operator.webhook_port), 30, "the webhooks to point at the operator")
    before, started = upkeep_requests(operator), time.monotonic()
    time.sleep(IDLE_WINDOW)  # the point of the test: an idle stretch
    idle = upkeep_requests(operator) - before
    per_minute = idle * 60 / (time.monotonic() - started)
    print(f"upkeep requests while idle: {idle:.0f} in {time.monotonic() - started:.1f}s ({per_minute:.1f}/min)")
    assert idle <= len(UPKEEP_RESOURCES), f"{idle:.0f} requests of the upkeep's objects while nothing changed"

    foreign = base64.b64encode(certs.new_ca("someone-else", datetime.timedelta(days=1)).cert_pem.encode()).decode()
    admission = client.AdmissionregistrationV1Api(kube.api)
    patch = {"webhooks": [{"name": w.VALIDATING_WEBHOOK, "clientConfig": {"caBundle": foreign}}]}
    admission.patch_validating_webhook_configuration(w.CONFIGURATION_NAME, patch)
    overwritten = time.monotonic()
    wait_until(
        lambda: client_configs(kube)[w.VALIDATE_PATH].get("caBundle") != foreign, 30, "the caBundle to be put back"
    )
    print(f"caBundle put back {time.monotonic() - overwritten:.2f}s after it was overwritten")
    assert pointed_at(kube, operator.webhook_port)


def test_a_second_operator_takes_the_webhooks_over_only_once_the_first_is_gone(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create(kube, namespace, job_manifest("probe", complete_after=None))
    second = start_operator(operator.kubeconfig, operator.log_path.with_name("second.log"))
    try:
        time.sleep(12)  # more than two checks (5 s apart): a live target is never taken over
        assert pointed_at(kube, operator.webhook_port)
        operator.stop(hard=True)
        stopped = time.monotonic()
        wait_until(lambda: pointed_at(kube, second.webhook_port), 30, "the second operator to take over")
        assert time.monotonic() - stopped < 20
        wait_until(lambda: converts(kube, namespace, "probe"), 30, "v1alpha1 to be served by the second")
    finally:
        operator.stop(hard=True)  # whatever happened above: one session operator, the second
        become_session_operator(operator, second)


def test_certificates_rotate_while_conversions_go_on(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    """A 10 s certificate from a 30 s CA: within 40 s the certificate is renewed several times and the CA once,
    announced in the bundle before it signs; every conversion meanwhile succeeds."""
    create(kube, namespace, job_manifest("probe", complete_after=None))
    wait_state(kube, namespace, "probe", "Running")
    operator.stop()
    core = kube.core
    core.delete_namespaced_secret(SECRET_NAME, OPERATOR_NAMESPACE)
    short = start_operator(
        operator.kubeconfig,
        operator.log_path.with_name("rotating.log"),
        *("--webhook-cert-validity", "10s", "--webhook-ca-validity", "30s"),
    )
    leaves, issuers, bundle_sizes, failures = set(), set(), set(), 0
    try:
        wait_until(lambda: pointed_at(kube, short.webhook_port), 30, "the rotating operator to take the webhooks")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            failures += 0 if converts(kube, namespace, "probe") else 1
            data = core.read_namespaced_secret(SECRET_NAME, OPERATOR_NAMESPACE).data
            bundle = base64.b64decode(data["ca-bundle.crt"]).decode()
            bundle_sizes.add(len(certs.split_bundle(bundle)))
            served = served_certificate(short.webhook_port, bundle)
            leaves.add(served.serial_number)
            issuers.add(
                served.issuer.rfc4514_string()
                + str(served.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier)
            )
            time.sleep(0.3)
        assert failures == 0, "a conversion failed during rotation"
        assert len(leaves) >= 3, f"the 10 s certificate was renewed: {len(leaves)} served"
        assert len(issuers) >= 2, "the CA was replaced"
        assert 2 in bundle_sizes, "the new CA was trusted before it signed"
    finally:
        short.stop()
        core.delete_namespaced_secret(SECRET_NAME, OPERATOR_NAMESPACE)  # the next operator makes a long-lived one
        become_session_operator(operator, start_operator(operator.kubeconfig, operator.log_path))


def test_a_taken_webhook_port_stops_the_operator_at_once_and_says_why(operator: RunningOperator) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = operator.log_path.with_name("taken.log")
        with pytest.raises(AssertionError, match="operator exited with 1"):
            start_operator(operator.kubeconfig, log, webhook_port=port)
    assert f"error: cannot serve the webhooks on 127.0.0.1:{port}" in log.read_text()
