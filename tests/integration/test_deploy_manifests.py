"""deploy/ applied to a real API server: the base and both overlays pass a server-side dry run (every kind the
cluster serves; the monitoring overlay's Prometheus Operator kinds are checked as YAML in test_deploy_rendered.py),
and the base runs two replicas on different nodes under PodSecurity `restricted`, behind its disruption budget and
Service.

The shipped RBAC, enforced by the API server, is in test_deploy_rbac_enforced.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.conftest import ClusterUnderTest
from tests.integration import deploy_support
from tests.integration.deploy_support import DEPLOY, OVERLAYS, PROMETHEUS_OPERATOR, group_kind, kubectl, render
from tests.kube import Kube, wait_until
from tests.operator_harness import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE

pytestmark = pytest.mark.integration

installed_rbac = deploy_support.installed_rbac  # module-scoped: deploy/rbac and the watched namespace

SELECTOR = "app.kubernetes.io/name=trainingjob-operator,app.kubernetes.io/component=manager"
REGISTRATION = ("CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


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
            "CustomResourceDefinition",  # LLMModel (docs/serving.md)
            "CustomResourceDefinition",  # TrainingSweep (docs/sweeps.md)
            *("CustomResourceDefinition", "CustomResourceDefinition"),  # the two runtimes (docs/runtimes.md)
            *("Role", "RoleBinding", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"),
            "NetworkPolicy",  # deploy/manager/network-policy.yaml: the webhook port to the API server only
            *("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"),
            *("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"),  # the webhooks' (deploy/rbac/webhooks.yaml)
            "ClusterRole",  # trainingjob-host-access (deploy/rbac/host-access.yaml), bound to nobody
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


# ---- the base on the cluster


def test_the_base_runs_two_replicas_on_different_nodes_under_pod_security_restricted(
    cluster: ClusterUnderTest, kube: Kube, installed_rbac: None
) -> None:
    nodes = kube.core.list_node().items
    kwok = [n for n in nodes if (n.metadata.annotations or {}).get("kwok.x-k8s.io/node") == "fake"]
    if len(kwok) < 2:
        pytest.skip("needs 2 kwok nodes: on a real cluster the placeholder image cannot be pulled")
    namespace = kube.core.read_namespace(OPERATOR_NAMESPACE)
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    # Everything but the API registration (CRD, webhook configurations): in the cluster they would point at this
    # Service, whose kwok-run replicas serve nothing, while the session's operator serves the webhooks (the rendered
    # registration is checked in test_deploy_rendered.py).
    running = [d for d in render(cluster, DEPLOY) if d["kind"] not in REGISTRATION]
    # Only kwok nodes can "run" the placeholder image; the local process nodes beside them would refuse to pull it.
    for document in running:
        if document["kind"] == "Deployment":
            document["spec"]["template"]["spec"]["nodeSelector"] = {"type": "kwok"}
    kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump_all(running))
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
        ports = {(p.name, p.port) for s in slices for p in s.ports}
        assert ports == {("metrics", 9090), ("progress", 8443), ("webhook", 9443)}
    finally:
        kubectl(cluster, "delete", "-k", str(DEPLOY / "manager"), "--wait=true")
