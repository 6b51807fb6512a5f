"""`helm install` of charts/trainingjob-operator on a fresh local cluster of its own (the session's cluster already
holds deploy/'s objects under the same names): the CRD is established, every rendered object exists, the
operator's pods are admitted under PodSecurity `restricted` and scheduled — onto kwok nodes, which run no
containers, so the operator itself does not run here (the operator under this RBAC is tested elsewhere) — and
`helm uninstall` removes what it installed but keeps the CRD (Helm never deletes CRDs, nor the jobs they hold)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import TEST_CLUSTER_NAME
from tests.helm_support import CHART, NAMESPACE, RELEASE, helm_binary, objects, run
from tests.kube import Kube, wait_until

pytestmark = pytest.mark.integration
CRD = "trainingjobs.ml.example.com"


@pytest.fixture(scope="module")
def helm_cluster() -> Iterator[Path]:
    if os.environ.get("TJ_USE_EXISTING_CLUSTER", "").lower() in ("1", "true", "yes"):
        pytest.skip("installs the chart on a fresh local cluster of its own")
    helm_binary()
    from trainingjob.cluster import control_plane

    name = f"{TEST_CLUSTER_NAME}-helm"
    state = control_plane.up(name, nodes=2, say=lambda _: None, local_nodes=0)  # the chart runs on kwok
    yield state.kubeconfig
    if os.environ.get("TJ_KEEP_CLUSTER", "").lower() not in ("1", "true", "yes"):
        control_plane.down(name, say=lambda _: None)


def established(kube: Kube) -> bool:
    conditions = kube.extensions.read_custom_resource_definition(CRD).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def test_helm_install_creates_every_object_and_uninstall_removes_them(helm_cluster: Path, tmp_path: Path) -> None:
    from trainingjob.cluster.build import binary_path

    kubectl = [binary_path("kubectl"), f"--kubeconfig={helm_cluster}"]
    helm = [helm_binary(), f"--kubeconfig={helm_cluster}", "--namespace", NAMESPACE]
    run([*kubectl, "apply", "-f", "deploy/rbac/00-namespace.yaml"], tmp_path)  # docs/helm.md: labelled first
    run([*helm, "install", RELEASE, CHART, "--set", "replicas=2"], tmp_path)
    kube = Kube(helm_cluster)

    wait_until(lambda: established(kube), 60, f"CRD {CRD} to be Established")
    manifest = run([*helm, "get", "manifest", RELEASE], tmp_path).stdout
    for _, kind, namespace, name in objects(manifest):
        scope = ["-n", namespace] if namespace else []
        found = run([*kubectl, "get", kind, name, *scope, "-o", "yaml"], tmp_path, check=False)
        assert found.returncode == 0, f"{kind} {namespace}/{name} missing: {found.stderr}"
        labels = yaml.safe_load(found.stdout)["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"

    selector = "app.kubernetes.io/name=trainingjob-operator,app.kubernetes.io/component=manager"

    def scheduled() -> list:
        pods = kube.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        return pods if len(pods) == 2 and all(p.spec.node_name for p in pods) else []

    pods = wait_until(scheduled, 90, "both operator pods to be admitted and scheduled")
    assert {p.spec.node_name for p in pods} <= {f"tj-node-{i}" for i in range(2)}  # kwok nodes: nothing runs

    run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "120s"], tmp_path)
    gone = run([*kubectl, "get", "deployment,service,serviceaccount", "-n", NAMESPACE, "-o", "name"], tmp_path)
    assert "trainingjob-operator" not in gone.stdout
    assert run([*kubectl, "get", "crd", CRD], tmp_path, check=False).returncode == 0
