"""Kueue on the session's cluster (cluster/kueue/), and the queue objects the Kueue tests create.

Kueue's cluster-scoped objects (ResourceFlavor, ClusterQueue, Cohort, WorkloadPriorityClass) get names unique to
the test (its namespace), and are deleted afterwards, so tests can share one Kueue.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.kube import Kube
from tests.prerequisites import component_on_cluster

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
KUEUE_HINT = "Kueue is not built; build it once with: tj cluster build --with-kueue (or make tools)"
CLUSTER_SCOPED = {
    "ResourceFlavor": "resourceflavors",
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "MultiKueueCluster": "multikueueclusters",
    "MultiKueueConfig": "multikueueconfigs",
    "AdmissionCheck": "admissionchecks",
}


@pytest.fixture(scope="session")
def kueue(cluster: ClusterUnderTest):
    """Kueue running on the session's cluster (started if it does not run); its ClusterState."""
    from trainingjob.cluster.build import KUEUE
    from trainingjob.cluster.kueue.run import ensure_running

    return component_on_cluster(KUEUE, KUEUE_HINT, ensure_running, "the Kueue tests start Kueue")


RESTARTED: list[bool] = []


@pytest.fixture
def kueue_operator(kueue, operator):
    """The session's operator, seeing Kueue: started again once after Kueue came up (an operator that started
    first finds Kueue's API by its informers' retries, up to 30 s later; a restart makes the tests not wait)."""
    from tests.operator_harness import restart

    if not RESTARTED:
        restart(operator)
        RESTARTED.append(True)
    return operator


class Queues:
    """Creates Kueue objects for one test and deletes the cluster-scoped ones afterwards."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.created: list[tuple[str, str]] = []

    def name(self, base: str) -> str:
        return f"{base}-{self.namespace}"

    def create(self, kind: str, name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec, **extra}
        if kind in CLUSTER_SCOPED:
            self.created.append((CLUSTER_SCOPED[kind], name))
            return self.kube.custom.create_cluster_custom_object(GROUP, VERSION, CLUSTER_SCOPED[kind], body)
        plural = f"{kind.lower()}s"
        return self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, body)

    def flavor(self, base: str = "gpu", node_labels: dict[str, str] | None = None) -> str:
        name = self.name(base)
        self.create("ResourceFlavor", name, {"nodeLabels": node_labels or {}})
        return name

    def cluster_queue(
        self, base: str, flavor: str, gpus: int, cpu: str = "64", memory: str | None = None, **spec: Any
    ) -> str:
        """A ClusterQueue of one flavor; `memory` covers memory too (Kueue admits no pod set that requests a
        resource its ClusterQueue does not cover, and the real examples request memory)."""
        name = self.name(base)
        quotas = {"cpu": cpu, **({"memory": memory} if memory else {}), "nvidia.com/gpu": gpus}
        resources = [{"name": resource, "nominalQuota": quota} for resource, quota in quotas.items()]
        group = {"coveredResources": list(quotas), "flavors": [{"name": flavor, "resources": resources}]}
        self.create("ClusterQueue", name, {"namespaceSelector": {}, "resourceGroups": [group], **spec})
        return name

    def local_queue(self, name: str, cluster_queue: str) -> str:
        self.create("LocalQueue", name, {"clusterQueue": cluster_queue})
        return name

    def priority_class(self, base: str, value: int) -> str:
        name = self.name(base)
        self.created.append(("workloadpriorityclasses", name))
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        self.kube.custom.create_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", body)
        return name

    def workload(self, name: str) -> dict[str, Any] | None:
        try:
            return self.kube.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, "workloads", name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def cleanup(self) -> None:
        for plural, name in reversed(self.created):
            try:
                self.kube.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
            except ApiException as error:
                if error.status != 404:
                    raise


@pytest.fixture
def queues(kube: Kube, namespace: str, kueue) -> Iterator[Queues]:
    created = Queues(kube, namespace)
    yield created
    created.cleanup()


def condition(body: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for item in ((body or {}).get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return item
    return None


def holds(body: dict[str, Any] | None, kind: str) -> bool:
    found = condition(body, kind)
    return found is not None and found.get("status") == "True"


def pending_workloads(cluster: ClusterUnderTest, namespace: str, local_queue: str) -> list[dict[str, Any]]:
    """Kueue's visibility API, through the API server's aggregation layer (as kubectl and our CLI reach it)."""
    path = f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
    result = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", "get", "--raw", path],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(result.stdout).get("items") or []
