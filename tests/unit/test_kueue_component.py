"""Kueue as a component of the local cluster: its configuration, certificates and install objects (pure parts).

The install objects are checked on documents shaped like Kueue's rendered config/default (written here, not copied)
and, when Kueue is built, on the real rendering of the pinned module.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.prerequisites import missing_prerequisite
from trainingjob.cluster import pki
from trainingjob.cluster.build import KUEUE, is_built
from trainingjob.cluster.kueue import install, settings
from trainingjob.cluster.kueue.build import MANIFESTS, kueue_dir

PORTS = {"kueue-webhook": 9001, "kueue-visibility": 9002, "kueue-health": 9003, "kueue-metrics": 9004}
LAYOUT = settings.KueueLayout(Path("/state/c1"), Path("/state/c1/pki"))
URL = "https://127.0.0.1:9001"
BUNDLE = "Q0EK"


def test_every_server_of_kueue_listens_on_loopback_at_this_clusters_ports() -> None:
    config = settings.configuration(LAYOUT, PORTS)
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:9003"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:9004"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9001, "certDir": "/state/c1/kueue/certs/webhook"}
    assert config["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 9002}


def test_kueue_uses_our_certificates_and_knows_trainingjobs_as_an_external_framework() -> None:
    config = settings.configuration(LAYOUT, PORTS)
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["namespace"] == "kueue-system"
    assert config["integrations"]["externalFrameworks"] == ["TrainingJob.v1.ml.example.com"]
    assert config["multiKueue"]["externalFrameworks"] == [{"name": "TrainingJob.v1.ml.example.com"}]
    assert not config["manageJobsWithoutQueueName"]


def test_fair_sharing_is_on_with_both_of_kueues_preemption_strategies_in_a_set_it_accepts() -> None:
    """Kueue refuses a fairSharing without preemptionStrategies, and accepts only its listed sets of them."""
    config = settings.configuration(LAYOUT, PORTS)
    assert config["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def test_the_fixed_certificate_paths_are_bound_from_this_clusters_directories() -> None:
    assert LAYOUT.bind_mounts() == {
        Path("/state/c1/kueue/certs/visibility"): Path("/visibility"),
        Path("/state/c1/kueue/certs/metrics"): Path("/etc/kueue/metrics/certs"),
    }
    command = settings.command(Path("/bin/kueue"), LAYOUT)
    assert "--config=/state/c1/kueue/config.yaml" in command
    assert "--kubeconfig=/state/c1/kueue.kubeconfig" in command


def test_serving_and_client_certificates_carry_what_the_api_server_checks(tmp_path: Path) -> None:
    ca = pki.create_ca(tmp_path, "unit")
    serving, client = settings.cert_specs()
    for spec in (serving, client):
        pki.issue_certificate(tmp_path, spec, ca)
    served = x509.load_pem_x509_certificate((tmp_path / "kueue-serving.crt").read_bytes())
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert "kueue-visibility-server.kueue-system.svc" in names.get_values_for_type(x509.DNSName)
    identity = x509.load_pem_x509_certificate((tmp_path / "kueue.crt").read_bytes()).subject
    assert identity.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == (
        "system:serviceaccount:kueue-system:kueue-controller-manager"
    )
    groups = [a.value for a in identity.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)]
    assert groups == ["system:serviceaccounts", "system:serviceaccounts:kueue-system"]


def service_config(path: str) -> dict[str, Any]:
    return {"service": {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": path}}


def webhook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    rule = {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource]}
    return {"name": name, "clientConfig": service_config(path), "rules": [rule], "failurePolicy": "Fail"}


def upstream_like() -> list[dict[str, Any]]:
    """The kinds and shapes `kubectl kustomize config/default` of Kueue v0.17.0 renders (abridged)."""
    meta = {"namespace": "kueue-system"}
    return [
        {"kind": "Deployment", "metadata": {"name": "kueue-controller-manager", **meta}},
        {"kind": "Secret", "metadata": {"name": "kueue-webhook-server-cert", **meta}},
        {"kind": "ConfigMap", "metadata": {"name": "kueue-manager-config", **meta}},
        {"kind": "Service", "metadata": {"name": "kueue-webhook-service", **meta}},
        {"kind": "Service", "metadata": {"name": "kueue-controller-manager-metrics-service", **meta}},
        {
            "kind": "Service",
            "metadata": {"name": "kueue-visibility-server", "labels": {"app.kubernetes.io/name": "kueue"}, **meta},
            "spec": {"ports": [{"port": 443, "targetPort": 8082}]},
        },
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "kueue-mutating-webhook-configuration"},
            "webhooks": [
                webhook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
                webhook("mclusterqueue.kb.io", "kueue.x-k8s.io", "clusterqueues", "/mutate-cq"),
                webhook("mpytorchjob.kb.io", "kubeflow.org", "pytorchjobs", "/mutate-pytorchjob"),
            ],
        },
        {
            "kind": "APIService",
            "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"},
            "spec": {
                "insecureSkipTLSVerify": True,
                "service": {"name": "kueue-visibility-server", "namespace": "kueue-system"},
            },
        },
        {"kind": "ClusterRole", "metadata": {"name": "kueue-manager-role"}, "rules": []},
        {
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "workloads.kueue.x-k8s.io"},
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {"clientConfig": service_config("/convert"), "conversionReviewVersions": ["v1"]},
                }
            },
        },
        {"kind": "Namespace", "metadata": {"name": "kueue-system"}},
    ]


def objects() -> dict[tuple[str, str], dict[str, Any]]:
    result = install.install_objects(upstream_like(), URL, 9002, BUNDLE)
    return {(o["kind"], o["metadata"]["name"]): o for o in result}


def test_what_a_pod_of_kueue_needs_is_left_out() -> None:
    names = set(objects())
    assert ("Deployment", "kueue-controller-manager") not in names
    assert ("Secret", "kueue-webhook-server-cert") not in names
    assert ("ConfigMap", "kueue-manager-config") not in names
    assert ("Service", "kueue-webhook-service") not in names
    assert ("Service", "kueue-controller-manager-metrics-service") not in names
    assert ("ClusterRole", "kueue-manager-role") in names


def test_webhooks_are_addressed_at_the_process_with_our_ca_and_only_for_kinds_kueue_manages_here() -> None:
    mutating = objects()[("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration")]
    by_name = {w["name"]: w["clientConfig"] for w in mutating["webhooks"]}
    assert by_name == {
        "mclusterqueue.kb.io": {"url": f"{URL}/mutate-cq", "caBundle": BUNDLE},
        "mpytorchjob.kb.io": {"url": f"{URL}/mutate-pytorchjob", "caBundle": BUNDLE},
    }


def test_crd_conversion_goes_to_the_process() -> None:
    crd = objects()[("CustomResourceDefinition", "workloads.kueue.x-k8s.io")]
    config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    assert config == {"url": f"{URL}/convert", "caBundle": BUNDLE}


def test_the_aggregator_reaches_the_visibility_server_through_an_external_name_with_our_ca() -> None:
    service = objects()[("Service", "kueue-visibility-server")]
    assert service["spec"] == {"type": "ExternalName", "externalName": "localhost"}
    assert service["metadata"]["labels"] == {"app.kubernetes.io/name": "kueue"}
    spec = objects()[("APIService", "v1beta2.visibility.kueue.x-k8s.io")]["spec"]
    assert "insecureSkipTLSVerify" not in spec
    assert spec["caBundle"] == BUNDLE
    assert spec["service"] == {"name": "kueue-visibility-server", "namespace": "kueue-system", "port": 9002}


def test_namespace_and_crds_come_first_and_webhooks_last() -> None:
    kinds = [o["kind"] for o in install.install_objects(upstream_like(), URL, 9002, BUNDLE)]
    assert kinds[:2] == ["Namespace", "CustomResourceDefinition"]
    assert kinds[-1] == "MutatingWebhookConfiguration"


def test_upstream_documents_are_not_changed() -> None:
    documents = upstream_like()
    install.install_objects(documents, URL, 9002, BUNDLE)
    assert documents == upstream_like()


@pytest.mark.parametrize(
    ("framework", "expected"),
    [("kubeflow.org/pytorchjob", ("kubeflow.org", "pytorchjobs")), ("batch/job", ("batch", "jobs"))],
)
def test_framework_names_map_to_their_resources(framework: str, expected: tuple[str, str]) -> None:
    assert install.framework_resource(framework) == expected


# --- with Kueue built (`make tools`) --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    if not is_built(KUEUE):
        missing_prerequisite("Kueue is not built; build it once with: tj cluster build --with-kueue (or make tools)")
    return [d for d in yaml.safe_load_all((kueue_dir() / MANIFESTS).read_text()) if d]


def test_the_real_manifests_leave_no_object_addressed_at_a_service_of_kueue(rendered: list[dict[str, Any]]) -> None:
    result = install.install_objects(rendered, URL, 9002, BUNDLE)
    kinds = {o["kind"] for o in result}
    assert {"CustomResourceDefinition", "APIService", "ValidatingWebhookConfiguration", "ClusterRole"} <= kinds
    for document in result:
        for hook in document.get("webhooks") or []:
            assert hook["clientConfig"]["url"].startswith(URL + "/"), hook["name"]
        conversion = (document.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            assert conversion["webhook"]["clientConfig"]["url"] == f"{URL}/convert"
    crds = {o["metadata"]["name"] for o in result if o["kind"] == "CustomResourceDefinition"}
    assert {"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"} <= crds


def test_kueue_may_read_trainingjobs_and_write_their_status() -> None:
    """MultiKueue's adapter reads a dispatched TrainingJob and copies its worker's status onto it; Kueue's own
    manifests cannot grant that for a kind they do not know."""
    found = objects()
    role = found[("ClusterRole", "kueue-trainingjobs")]
    binding = found[("ClusterRoleBinding", "kueue-trainingjobs")]
    granted = {(r["resources"][0], verb) for r in role["rules"] for verb in r["verbs"]}
    assert {("trainingjobs", "watch"), ("trainingjobs/status", "patch")} <= granted
    assert ("trainingjobs", "create") not in granted and ("trainingjobs", "delete") not in granted
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
    ]
