"""`helm install` of charts/trainingjob-operator on a fresh local cluster of its own (the session's cluster already
holds deploy/'s objects under the same names): the CRD is established, every rendered object exists, the
operator's pods are admitted under PodSecurity `restricted` and scheduled — onto kwok nodes, which run no
containers — and `helm uninstall` removes what it installed but keeps the CRD (Helm never deletes CRDs, nor the
jobs they hold). Then docs/helm.md's hand-over of objects `kubectl apply -f deploy/rbac/` made, run as written; and
`helm test` against an operator that really runs, placed on the cluster's local process node with the image's
local stand-in (examples/images.yaml)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import TEST_CLUSTER_NAME
from tests.helm_support import CHART, NAMESPACE, RELEASE, REPO, helm_binary, objects, run
from tests.integration.test_docs_paths import doc_blocks
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION

pytestmark = pytest.mark.integration
CRD = "trainingjobs.ml.example.com"


@pytest.fixture(scope="module")
def helm_cluster() -> Iterator[Path]:
    if os.environ.get("TJ_USE_EXISTING_CLUSTER", "").lower() in ("1", "true", "yes"):
        pytest.skip("installs the chart on a fresh local cluster of its own")
    helm_binary()
    from trainingjob.cluster import control_plane

    name = f"{TEST_CLUSTER_NAME}-helm"
    # The chart's pods go to kwok unless placed on the local node (tainted), where `helm test`'s operator runs.
    state = control_plane.up(name, nodes=2, say=lambda _: None, local_nodes=1)
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


def tools(helm_cluster: Path) -> tuple[list[str | Path], list[str | Path]]:
    from trainingjob.cluster.build import binary_path

    kubectl = [binary_path("kubectl"), f"--kubeconfig={helm_cluster}"]
    return kubectl, [helm_binary(), f"--kubeconfig={helm_cluster}", "--namespace", NAMESPACE]


def test_helm_install_after_kubectl_apply_takes_the_objects_over_as_docs_helm_says(
    helm_cluster: Path, tmp_path: Path
) -> None:
    from trainingjob.cluster.build import binary_path

    kubectl, helm = tools(helm_cluster)
    run([*kubectl, "apply", "-f", "deploy/crd/", "-f", "deploy/rbac/"], tmp_path)
    refused = run([*helm, "install", RELEASE, CHART], tmp_path, check=False)
    assert refused.returncode != 0 and "invalid ownership metadata" in refused.stderr, refused.stderr

    [adopt] = [code for name, code in doc_blocks(REPO / "docs" / "helm.md").items() if name == "helm-adopt"]
    path = f"{binary_path('kubectl').parent}:{helm_binary().parent}:{os.environ['PATH']}"
    helm_homes = {f"HELM_{kind}_HOME": str(tmp_path / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    environment = {**os.environ, "KUBECONFIG": str(helm_cluster), "PATH": path, **helm_homes}
    adopted = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", adopt],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "STATUS: deployed" in adopted.stdout
    account = run([*kubectl, "get", "serviceaccount", "trainingjob-operator", "-n", NAMESPACE, "-o", "yaml"], tmp_path)
    assert yaml.safe_load(account.stdout)["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "120s"], tmp_path)


def test_helm_test_passes_against_an_operator_that_really_runs(helm_cluster: Path, tmp_path: Path) -> None:
    kubectl, helm = tools(helm_cluster)
    run([*kubectl, "apply", "-f", "deploy/rbac/00-namespace.yaml"], tmp_path)
    placement = [
        "--set", "replicas=1",
        "--set-json", f"nodeSelector={json.dumps(LOCAL_NODE_SELECTOR)}",
        "--set-json", f"tolerations={json.dumps([LOCAL_NODE_TOLERATION])}",
    ]  # fmt: skip
    installed = run([*helm, "install", RELEASE, CHART, *placement], tmp_path)
    assert "helm test trainingjob-operator -n trainingjob-system --logs" in installed.stdout  # NOTES.txt
    try:
        run(
            [*kubectl, "-n", NAMESPACE, "rollout", "status", "deployment/trainingjob-operator", "--timeout=170s"],
            tmp_path,
        )
        tested = run([*helm, "test", RELEASE, "--logs", "--timeout", "170s"], tmp_path, check=False)
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert "Phase:          Succeeded" in tested.stdout
        assert "ok: trainingjobs.ml.example.com served" in tested.stdout
        assert "ok: operator trainingjob-operator-" in tested.stdout and "leads" in tested.stdout
    finally:
        run([*helm, "uninstall", RELEASE, "--wait", "--timeout", "120s"], tmp_path, check=False)
