"""deploy/ against a real API server: the base and both overlays render with kustomize and pass a server-side dry
run; the Deployment is hardened and runs two spread replicas; the shipped RBAC refuses what the operator does not
use; and the namespaced overlay's grants are enough for an operator that watches one namespace.
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
from tests.integration.test_progress_endpoint import pod_token, worker_ca
from tests.jobs import create_job, delete_job, get_job, job_manifest, patch_job, wait_phase
from tests.kube import Kube, restricted_pod, wait_until
from tests.metrics import scrape_url
from tests.operator_harness import (
    OPERATOR_ACCOUNT,
    OPERATOR_NAMESPACE,
    REPO,
    apply_manifests,
    free_port,
    service_account_kubeconfig,
)
from tests.rbac_usage import used_by_code
from trainingjob.cli.operator import operator as operator_command

pytestmark = pytest.mark.integration

DEPLOY = REPO / "deploy"
OVERLAYS = {"namespaced": DEPLOY / "overlays" / "namespaced", "monitoring": DEPLOY / "overlays" / "monitoring"}
RENDERED = {"base": DEPLOY, **OVERLAYS}
WATCHED = "ml-team-a"  # the namespaced overlay's example
PROMETHEUS_OPERATOR = {("monitoring.coreos.com", "ServiceMonitor"), ("monitoring.coreos.com", "PrometheusRule")}
SELECTOR = "app.kubernetes.io/name=trainingjob-operator,app.kubernetes.io/component=manager"
ALL_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def kubectl(cluster: ClusterUnderTest, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stderr}"
    return result.stdout


def render(cluster: ClusterUnderTest, directory: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(kubectl(cluster, "kustomize", str(directory))) if doc]


def group_kind(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["apiVersion"].rpartition("/")[0], doc["kind"]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return found


def operator_subject(binding: dict[str, Any]) -> bool:
    return any(
        s["kind"] == "ServiceAccount" and (s.get("namespace"), s["name"]) == (OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
        for s in binding["subjects"]
    )


def forbidden(call: Any, *args: Any, **kwargs: Any) -> ApiException:
    with pytest.raises(ApiException) as raised:
        call(*args, **kwargs)
    assert raised.value.status == 403, raised.value
    return raised.value


def allowed(kube: Kube, user: str, verb: str, resource: str, group: str = "", namespace: str = "") -> bool:
    """SubjectAccessReview: may `user` do `verb` on `resource` (in `namespace`; "" for cluster-wide)?"""
    resource, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
    if namespace:
        attributes["namespace"] = namespace
    review = client.AuthorizationV1Api(kube.api).create_subject_access_review(
        {"spec": {"user": user, "resourceAttributes": attributes}}
    )
    return bool(review.status.allowed)


def ensure_namespace(kube: Kube, name: str) -> None:
    """Create `name`, or keep it; one still terminating from an earlier run is waited for and created anew."""

    def created() -> bool:
        try:
            kube.core.create_namespace({"metadata": {"name": name}})
        except ApiException as error:
            if error.status != 409:
                raise
            return kube.core.read_namespace(name).status.phase == "Active"
        return True

    wait_until(created, 120, f"namespace {name}", interval=1)


@pytest.fixture(scope="module")
def installed_rbac(cluster: ClusterUnderTest, kube: Kube, trainingjob_crd: None) -> Iterator[None]:
    """deploy/rbac applied for real (its namespace must exist before a server dry run of the rest), and the
    namespaced overlay's example namespace (a team's namespace exists before the operator is told to watch it)."""
    apply_manifests(cluster.kubectl, cluster.kubeconfig, DEPLOY / "rbac")
    ensure_namespace(kube, WATCHED)
    yield
    kube.core.delete_namespace(WATCHED)


@pytest.fixture(scope="module")
def served_kinds(cluster: ClusterUnderTest, trainingjob_crd: None) -> set[tuple[str, str]]:
    """(group, kind) of every type the API server serves (`kubectl api-resources`)."""
    served = set()
    for line in kubectl(cluster, "api-resources", "--no-headers").splitlines():
        fields = line.split()  # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND
        served.add((fields[-3].rpartition("/")[0], fields[-1]))
    return served


def server_dry_run(cluster: ClusterUnderTest, docs: list[dict[str, Any]]) -> list[str]:
    output = kubectl(cluster, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(docs))
    return [line for line in output.splitlines() if line.endswith("(server dry run)")]


# ---- kustomize renders, the API server accepts


def test_the_base_passes_a_server_side_dry_run(cluster: ClusterUnderTest, installed_rbac: None) -> None:
    output = kubectl(cluster, "apply", "-k", str(DEPLOY), "--dry-run=server")
    lines = [line for line in output.splitlines() if line.endswith("(server dry run)")]
    kinds = sorted(d["kind"] for d in render(cluster, DEPLOY))
    assert len(lines) == len(kinds), output
    assert kinds == sorted(
        [
            *("Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"),
            *("Role", "RoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"),
        ]
    )


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_each_overlay_renders_and_the_server_accepts_every_kind_it_serves(
    cluster: ClusterUnderTest, installed_rbac: None, served_kinds: set[tuple[str, str]], overlay: str
) -> None:
    docs = render(cluster, OVERLAYS[overlay])
    served = [d for d in docs if group_kind(d) in served_kinds]
    not_served = {group_kind(d) for d in docs} - served_kinds
    assert not_served <= PROMETHEUS_OPERATOR, f"unknown kinds: {not_served - PROMETHEUS_OPERATOR}"
    assert len(server_dry_run(cluster, served)) == len(served)
    if overlay == "monitoring":
        assert not_served == PROMETHEUS_OPERATOR  # checked field by field below: this cluster has no such CRDs


def test_the_monitoring_overlay_scrapes_the_metrics_port_and_alerts_when_the_operator_is_gone(
    cluster: ClusterUnderTest,
) -> None:
    docs = render(cluster, OVERLAYS["monitoring"])
    service, monitor, rule = one(docs, "Service"), one(docs, "ServiceMonitor"), one(docs, "PrometheusRule")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [OPERATOR_NAMESPACE]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert endpoint["port"] == "metrics" and ports == {"metrics": 9090, "progress": 8443}
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True  # the metrics' own namespace/job labels win (tests/unit/test_monitoring.py)
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r}
    # The Prometheus Operator names the scrape job after the Service, which is what the Down alert selects.
    assert f'job="{service["metadata"]["name"]}"' in alerts["TrainingJobOperatorDown"]["expr"]
    assert {
        "TrainingJobFailed",
        "TrainingJobStuckPending",
        "TrainingJobRestartRateHigh",
        "TrainingJobReconcileErrors",
    } <= set(alerts)
    dashboard = one(docs, "ConfigMap", "trainingjob-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    # Everything but the monitoring objects is the base, unchanged.
    base = render(cluster, DEPLOY)
    assert [d for d in docs if group_kind(d) not in PROMETHEUS_OPERATOR and d is not dashboard] == base


@pytest.mark.parametrize("variant", sorted(RENDERED))
def test_the_rendered_deployment_is_hardened_and_highly_available(cluster: ClusterUnderTest, variant: str) -> None:
    deployment = one(render(cluster, RENDERED[variant]), "Deployment", "trainingjob-operator")
    assert deployment["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == OPERATOR_ACCOUNT and pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/example/trainingjob-operator:0.1.0"
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in one_volume(pod, tmp["name"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9090, "progress": 8443}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    (preferred,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]

    # `tj operator` accepts exactly these arguments, and they serve the ports the probes and the Service use.
    assert container["command"] == ["tj"] and container["args"][0] == "operator"
    params = operator_command.make_context("operator", list(container["args"][1:])).params
    assert params["liveness_endpoint"] == "http://0.0.0.0:8080/healthz"
    assert (params["metrics_port"], params["progress_port"], params["log_format"]) == (9090, 8443, "json")
    assert params["leader_elect"] is True
    if variant == "namespaced":
        assert params["namespaces"] == (WATCHED,) and not params["all_namespaces"]
    else:
        assert params["all_namespaces"] and params["namespaces"] == ()


def one_volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (volume,) = [v for v in pod["volumes"] if v["name"] == name]
    return volume


def test_the_namespaced_overlay_binds_no_cluster_wide_role_to_the_operator(cluster: ClusterUnderTest) -> None:
    docs = render(cluster, OVERLAYS["namespaced"])
    cluster_roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert list(cluster_roles) == ["trainingjob-operator-tokenreview"], "the base's ClusterRole must be gone"
    (tokenreview,) = cluster_roles.values()
    assert tokenreview["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding" and operator_subject(d)]
    assert [b["roleRef"]["name"] for b in bindings] == ["trainingjob-operator-tokenreview"]
    role, binding = one(docs, "Role", "trainingjob-operator"), one(docs, "RoleBinding", "trainingjob-operator")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == WATCHED
    assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) == ("Role", "trainingjob-operator")
    assert operator_subject(binding)
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args and args[args.index("--namespace") + 1] == WATCHED


# ---- the base on the cluster


def test_the_base_runs_two_replicas_on_different_nodes_under_pod_security_restricted(
    cluster: ClusterUnderTest, kube: Kube, installed_rbac: None
) -> None:
    nodes = kube.core.list_node().items
    if not all((n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake" for n in nodes):
        pytest.skip("needs kwok nodes: on a real cluster the placeholder image cannot be pulled")
    namespace = kube.core.read_namespace(OPERATOR_NAMESPACE)
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    kubectl(cluster, "apply", "-k", str(DEPLOY))
    try:
        apps = client.AppsV1Api(kube.api)
        wait_until(
            lambda: (
                (apps.read_namespaced_deployment("trainingjob-operator", OPERATOR_NAMESPACE).status.ready_replicas) == 2
            ),
            90,
            "2 ready replicas",
        )
        pods = kube.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=SELECTOR).items
        assert len(pods) == 2
        assert len({p.spec.node_name for p in pods}) == 2, "preferred anti-affinity spreads them over nodes"
        for pod in pods:
            assert pod.spec.service_account_name == OPERATOR_ACCOUNT
            assert pod.spec.containers[0].security_context.read_only_root_filesystem is True
        policy = client.PolicyV1Api(kube.api)
        budget = wait_until(
            lambda: (
                (pdb := policy.read_namespaced_pod_disruption_budget("trainingjob-operator", OPERATOR_NAMESPACE))
                and pdb.status.current_healthy == 2
                and pdb
            ),
            60,
            "the disruption budget to see both replicas",
        )
        assert budget.status.disruptions_allowed == 1, "one replica at a time may be drained"
        discovery = client.DiscoveryV1Api(kube.api)

        def ready_endpoints() -> list[Any]:
            slices = discovery.list_namespaced_endpoint_slice(
                OPERATOR_NAMESPACE, label_selector="kubernetes.io/service-name=trainingjob-operator"
            ).items
            ready = [e for s in slices for e in (s.endpoints or []) if e.conditions.ready]
            return slices if len(ready) == 2 else []

        slices = wait_until(ready_endpoints, 60, "both replicas behind the Service")
        assert {(p.name, p.port) for s in slices for p in s.ports} == {("metrics", 9090), ("progress", 8443)}
    finally:
        kubectl(cluster, "delete", "-k", str(DEPLOY / "manager"), "--wait=true")


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
    """For every resource the code touches in a job's namespace (and TokenReview), each of the eight verbs is
    allowed to the operator's account exactly when the code uses it (tests/unit/test_deploy_rbac.py reads the code)."""
    used = used_by_code()
    user = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_ACCOUNT}"
    # Leases and the TLS Secret live in the operator's own namespace (Roles there); everything else cluster-wide.
    own_namespace = {("coordination.k8s.io", "leases"), ("", "secrets")}
    resources = {(group, resource) for group, resource, _ in used} - own_namespace
    assert len(resources) == 8
    for group, resource in sorted(resources):
        scope = "" if resource == "tokenreviews" else namespace
        decisions = {verb: allowed(kube, user, verb, resource, group, scope) for verb in ALL_VERBS}
        assert decisions == {verb: (group, resource, verb) in used for verb in ALL_VERBS}, f"{group}/{resource}"
    for verb in ALL_VERBS:
        lease = ("coordination.k8s.io", "leases", verb) in used
        assert allowed(kube, user, verb, "leases", "coordination.k8s.io", OPERATOR_NAMESPACE) == lease, verb
        assert not allowed(kube, user, verb, "leases", "coordination.k8s.io", namespace), f"leases {verb} elsewhere"
        assert not allowed(kube, user, verb, "secrets", namespace=namespace), f"secrets {verb} in a job's namespace"
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


def token_kubeconfig(kube: Kube, account: str, path: Path) -> Path:
    token = kube.core.create_namespaced_service_account_token(
        account, OPERATOR_NAMESPACE, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    base = kube.api.configuration
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": base.host, "certificate-authority": base.ssl_ca_cert}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    return scrape_url(f"http://127.0.0.1:{port}/metrics")


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


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
    kubeconfig = token_kubeconfig(kube, PROBE_ACCOUNT, tmp_path / "probe.kubeconfig")
    health, progress, metrics = free_port(), free_port(), free_port()
    command = [
        *(sys.executable, "-m", "trainingjob.cli", "operator", "--namespace", WATCHED, "--log-format", "json"),
        *("--liveness", f"http://127.0.0.1:{health}/healthz", "--leader-election-id", PROBE_ACCOUNT),
        *("--progress-port", str(progress), "--progress-bind", "127.0.0.1"),
        *("--progress-url", f"https://127.0.0.1:{progress}", "--metrics-port", str(metrics)),
        *("--metrics-bind", "127.0.0.1"),
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
