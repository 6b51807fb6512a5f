"""What the tests of deploy/ share: where the base and the overlays are, rendering them with kustomize through the
session cluster's kubectl, reading the rendered objects, and `installed_rbac`.

`installed_rbac` is module-scoped and not autouse: a module whose tests need it binds it
(`installed_rbac = deploy_support.installed_rbac`). Each such module applies deploy/rbac (idempotent) and creates the
watched namespace once, deleting it at its end; the next one waits for that deletion before creating it anew.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.crd_support import apply_manifests
from tests.integration.v1_support import kubectl as run_kubectl
from tests.kube import Kube, wait_until
from tests.operator_harness import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, REPO

DEPLOY = REPO / "deploy"
OVERLAYS = {"namespaced": DEPLOY / "overlays" / "namespaced", "monitoring": DEPLOY / "overlays" / "monitoring"}
WATCHED = "ml-team-a"  # the namespaced overlay's example
PROMETHEUS_OPERATOR = {("monitoring.coreos.com", "ServiceMonitor"), ("monitoring.coreos.com", "PrometheusRule")}


def kubectl(cluster: ClusterUnderTest, *args: str, stdin: str | None = None) -> str:
    """kubectl's output; the test fails when kubectl does."""
    outcome = run_kubectl(cluster, *args, stdin=stdin)
    assert outcome.code == 0, f"kubectl {' '.join(args)} failed:\n{outcome.err}"
    return outcome.out


def render(cluster: ClusterUnderTest, directory: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(kubectl(cluster, "kustomize", str(directory))) if doc]


def group_kind(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["apiVersion"].rpartition("/")[0], doc["kind"]


def operator_subject(binding: dict[str, Any]) -> bool:
    return any(
        s["kind"] == "ServiceAccount" and (s.get("namespace"), s["name"]) == (OPERATOR_NAMESPACE, OPERATOR_ACCOUNT)
        for s in binding["subjects"]
    )


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
