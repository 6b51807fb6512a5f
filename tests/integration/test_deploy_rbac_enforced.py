"""The shipped RBAC, enforced by a real API server: the operator's account is refused what it is not granted and
allowed exactly the calls its code makes (tests/unit/test_deploy_rbac.py reads the code); and the namespaced
overlay's grants cover the watched namespace and nothing else, enough for an operator that watches one namespace to
run a job there, progress reports included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.crd_support import service_account_kubeconfig
from tests.integration import deploy_support
from tests.integration.deploy_support import OVERLAYS, WATCHED, kubectl, operator_subject, render
from tests.integration.test_progress_endpoint import pod_token, worker_ca
from tests.jobs import create_job, delete_job, get_job, job_manifest, patch_job, wait_phase
from tests.kube import Kube, restricted_pod, token_kubeconfig, wait_until
from tests.metrics import scrape_url
from tests.operator_harness import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, REPO, free_port, healthy
from tests.rbac_usage import CLUSTER_SCOPED, used_by_code

pytestmark = pytest.mark.integration

installed_rbac = deploy_support.installed_rbac  # module-scoped: deploy/rbac and the watched namespace

ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# Cluster-scoped objects the operator may touch only by name (deploy/rbac/webhooks.yaml).
BY_NAME = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): "trainingjobs.ml.example.com",
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): "trainingjob-operator",
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): "trainingjob-operator",
}


def forbidden(call: Any, *args: Any, **kwargs: Any) -> ApiException:
    with pytest.raises(ApiException) as raised:
        call(*args, **kwargs)
    assert raised.value.status == 403, raised.value
    return raised.value


def allowed(
    kube: Kube, user: str, verb: str, resource: str, group: str = "", namespace: str = "", name: str = ""
) -> bool:
    """SubjectAccessReview: may `user` do `verb` on `resource` (in `namespace`; "" for cluster-wide; `name`: one
    object of it)?"""
    resource, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
    if namespace:
        attributes["namespace"] = namespace
    if name:
        attributes["name"] = name
    review = client.AuthorizationV1Api(kube.api).create_subject_access_review(
        {"spec": {"user": user, "resourceAttributes": attributes}}
    )
    return bool(review.status.allowed)


# ---- the shipped RBAC, enforced by the API server


def test_the_operator_account_is_refused_what_it_is_not_granted(
    kube: Kube, installed_rbac: None, namespace: str, tmp_path: Path
) -> None:
    kube.core.create_namespaced_service(
        namespace, {"metadata": {"name": "someones"}, "spec": {"ports": [{"port": 80}]}}
    )
    kube.core.create_namespaced_pod(namespace, restricted_pod("someones"))
    as_operator = Kube(service_account_kubeconfig(kube, tmp_path / "operator.kubeconfig"))

    forbidden(as_operator.core.list_namespaced_secret, namespace)
    forbidden(as_operator.core.list_secret_for_all_namespaces)
    forbidden(as_operator.core.list_namespaced_secret, OPERATOR_NAMESPACE)  # only its TLS Secret, by name
    forbidden(as_operator.core.delete_namespaced_service, "someones", namespace)
    forbidden(as_operator.core.patch_namespaced_pod, "someones", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert kube.core.read_namespaced_service("someones", namespace).metadata.deletion_timestamp is None
    assert "x" not in (kube.core.read_namespaced_pod("someones", namespace).metadata.labels or {})

    pods = as_operator.core.list_namespaced_pod(namespace).items
    assert [p.metadata.name for p in pods] == ["someones"]
    assert as_operator.core.list_pod_for_all_namespaces(limit=1).items
    event = {
        "metadata": {"name": f"someones.{uuid.uuid4().hex[:8]}"},
        "involvedObject": {"kind": "Pod", "name": "someones", "namespace": namespace},
        "reason": "Probe",
        "message": "the operator may record events",
        "type": "Normal",
    }
    created = as_operator.core.create_namespaced_event(namespace, event)
    assert created.metadata.namespace == namespace


def test_the_api_server_allows_the_operator_exactly_the_calls_its_code_makes(
    kube: Kube, installed_rbac: None, namespace: str
) -> None:
    """For every resource the code touches in a job's namespace (and TokenReview and nodes, cluster-scoped), each of
    the eight verbs is allowed to the operator's account exactly when the code uses it (tests/unit/test_deploy_rbac.py
    reads the code)."""
    used = used_by_code()
    user = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_ACCOUNT}"
    # Leases and the TLS Secrets live in the operator's own namespace (Roles there); everything else cluster-wide.
    own_namespace = {("coordination.k8s.io", "leases"), ("", "secrets")}
    resources = {(group, resource) for group, resource, _ in used} - own_namespace
    # 17, plus the gang objects (Workloads, three kinds of PodGroup), plus LLMModels: llmmodels, llmmodels/status,
    # deployments, horizontalpodautoscalers, plus the job Service's EndpointSlices, plus TrainingSweeps:
    # trainingsweeps, trainingsweeps/status (their trials are TrainingJobs, already counted), plus the runtimes a
    # job names: clustertrainingruntimes and trainingruntimes (read only), plus SubjectAccessReviews (admission
    # asks whether a job's author may run its pods), plus Kueue's workloads, workloads/status, resourceflavors and
    # workloadpriorityclasses.
    assert len(resources) == 35
    for group, resource in sorted(resources):
        scope = "" if (group, resource) in CLUSTER_SCOPED else namespace
        name = BY_NAME.get((group, resource), "")
        decisions = {verb: allowed(kube, user, verb, resource, group, scope, name) for verb in ALL_VERBS}
        assert decisions == {verb: (group, resource, verb) in used for verb in ALL_VERBS}, f"{group}/{resource}"
        if name:  # and only that object
            assert not any(allowed(kube, user, verb, resource, group, scope, "other") for verb in ALL_VERBS)
    for verb in ALL_VERBS:
        lease = ("coordination.k8s.io", "leases", verb) in used
        assert allowed(kube, user, verb, "leases", "coordination.k8s.io", OPERATOR_NAMESPACE) == lease, verb
        assert not allowed(kube, user, verb, "leases", "coordination.k8s.io", namespace), f"leases {verb} elsewhere"
        # In a job's namespace only create: an MPI job's key (frameworks/mpi.py), never read back.
        creates = verb == "create" and ("", "secrets", "create") in used
        assert allowed(kube, user, verb, "secrets", namespace=namespace) == creates, f"secrets {verb} in a job's ns"
    for verb in ("list", "watch", "update", "patch", "delete", "deletecollection"):  # get: its own Secret, by name
        assert not allowed(kube, user, verb, "secrets", namespace=OPERATOR_NAMESPACE), f"secrets {verb}"


# ---- the namespaced overlay, live: its grants are all an operator watching one namespace needs

PROBE_ACCOUNT = "trainingjob-operator-ns-probe"


def probe_rbac(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The overlay's Roles and bindings, renamed (-probe) and bound to PROBE_ACCOUNT instead, so that the base's
    ClusterRoleBinding of the real account cannot lend the probe anything."""
    result = []
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
            continue
        doc = {**doc, "metadata": {**doc["metadata"], "name": doc["metadata"]["name"] + "-probe"}}
        if "roleRef" in doc:
            assert all(operator_subject({"subjects": [s]}) for s in doc["subjects"])
            doc["roleRef"] = {**doc["roleRef"], "name": doc["roleRef"]["name"] + "-probe"}
            doc["subjects"] = [{"kind": "ServiceAccount", "name": PROBE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}]
        result.append(doc)
    return result


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    return scrape_url(f"http://127.0.0.1:{port}/metrics")


@pytest.fixture
def probe_account(cluster: ClusterUnderTest, kube: Kube, installed_rbac: None) -> Iterator[str]:
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": PROBE_ACCOUNT, "namespace": OPERATOR_NAMESPACE},
    }
    manifests = yaml.safe_dump_all([account, *probe_rbac(render(cluster, OVERLAYS["namespaced"]))])
    kubectl(cluster, "apply", "-f", "-", stdin=manifests)
    yield f"system:serviceaccount:{OPERATOR_NAMESPACE}:{PROBE_ACCOUNT}"
    kubectl(cluster, "delete", "--ignore-not-found", "-f", "-", stdin=manifests)


def test_the_namespaced_grants_cover_the_watched_namespace_and_nothing_else(
    kube: Kube, probe_account: str, namespace: str
) -> None:
    user = probe_account
    assert allowed(kube, user, "create", "pods", namespace=WATCHED)
    assert allowed(kube, user, "watch", "trainingjobs", "ml.example.com", WATCHED)
    assert allowed(kube, user, "patch", "trainingjobs/status", "ml.example.com", WATCHED)
    assert allowed(kube, user, "create", "tokenreviews", "authentication.k8s.io")
    assert allowed(kube, user, "update", "leases", "coordination.k8s.io", OPERATOR_NAMESPACE)
    assert not allowed(kube, user, "list", "pods", namespace=namespace)
    assert not allowed(kube, user, "list", "pods")  # cluster-wide
    assert not allowed(kube, user, "list", "trainingjobs", "ml.example.com")
    assert not allowed(kube, user, "create", "pods", namespace="default")
    assert not allowed(kube, user, "get", "secrets", namespace=WATCHED)


def test_an_operator_with_only_the_namespaced_grants_runs_jobs_in_the_watched_namespace(
    kube: Kube, probe_account: str, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = token_kubeconfig(kube, PROBE_ACCOUNT, OPERATOR_NAMESPACE, tmp_path / "probe.kubeconfig")
    health, progress, metrics, webhooks = free_port(), free_port(), free_port(), free_port()
    command = [
        *(sys.executable, "-m", "trainingjob.cli", "operator", "--namespace", WATCHED, "--log-format", "json"),
        *("--liveness", f"http://127.0.0.1:{health}/healthz", "--leader-election-id", PROBE_ACCOUNT),
        *("--progress-port", str(progress), "--progress-bind", "127.0.0.1"),
        *("--progress-url", f"https://127.0.0.1:{progress}", "--metrics-port", str(metrics)),
        *("--metrics-bind", "127.0.0.1", "--webhook-port", str(webhooks)),
    ]
    log_path = tmp_path / "operator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": str(kubeconfig)}, cwd=REPO
        )
    try:
        wait_until(lambda: process.poll() is not None or healthy(f"http://127.0.0.1:{health}/healthz"), 60, "health")
        assert process.poll() is None, log_path.read_text()
        create_job(kube, WATCHED, job_manifest("watched", workers=2, complete_after=None))
        create_job(kube, namespace, job_manifest("unwatched", workers=1, complete_after=None))
        wait_phase(kube, WATCHED, "watched", "Running")
        assert len(kube.core.list_namespaced_pod(WATCHED, label_selector="ml.example.com/job-name=watched").items) == 2
        # In a full test run the session's all-namespaces operator may be reconciling too: the evidence of what this
        # one sees is its own cache (metrics) and log.
        samples = scrape(metrics)
        assert samples[("trainingjob_operator_leader", ())] == 1
        assert sum(v for (name, _), v in samples.items() if name == "trainingjob_jobs") == 1, "only ml-team-a/watched"
        # A worker's report is authenticated with TokenReview: the overlay's one cluster-scoped grant at work.
        token = pod_token(kube, WATCHED, "watched-worker-0")
        report = urllib.request.Request(
            f"https://127.0.0.1:{progress}/v1/namespaces/{WATCHED}/trainingjobs/watched/progress",
            data=json.dumps({"epoch": 1, "totalEpochs": 4}).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(report, context=worker_ca(kube, WATCHED, "watched"), timeout=10) as answer:
            assert answer.status == 202
        progress_key = ("trainingjob_job_progress_percent", (("job", "watched"), ("namespace", WATCHED)))
        wait_until(lambda: scrape(metrics).get(progress_key) == 25.0, 30, "status.progress at 25 %")
        delete_job(kube, WATCHED, "watched")
        wait_until(lambda: get_job(kube, WATCHED, "watched") is None, 60, "the finalizer to be released")
        text = log_path.read_text()
        assert "Forbidden" not in text and '"403' not in text and " 403" not in text, text[-4000:]
        assert namespace not in text and "unwatched" not in text, "it never looked at another namespace"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        release_job(kube, WATCHED, "watched")


def release_job(kube: Kube, namespace: str, name: str) -> None:
    """Delete a job that may still carry our finalizer after its operator stopped (else its namespace never goes)."""
    try:
        patch_job(kube, namespace, name, {"metadata": {"finalizers": []}})
        delete_job(kube, namespace, name)
    except ApiException as error:
        if error.status != 404:
            raise
