"""Kueue v0.17.0, built from its pinned module, as a component of the local cluster (`tj cluster up --with-kueue`).

Everything here goes through the real API server: Kueue's webhooks (addressed at its process with our CA), its
conversion webhook, its visibility API through the aggregation layer, and its scheduler admitting Workloads into a
ClusterQueue's quota. Workloads are created directly here, as an external job controller creates them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import TEST_CLUSTER_NAME, ClusterUnderTest
from tests.kube import Kube, wait_until
from tests.kueue_support import GROUP, VERSION, Queues, condition, holds, pending_workloads
from trainingjob.cluster import control_plane
from trainingjob.cluster import status as cluster_status
from trainingjob.cluster.kueue import run


def workload(name: str, queue: str, gpus: int, priority: int = 0) -> dict[str, Any]:
    """A Workload as an external job controller creates it. spec.priority is always set: Kueue's own integrations
    do, and its visibility API (v0.17.0) fails on a pending Workload without one."""
    container = {"name": "c", "image": "registry.example/x:1", "resources": {"requests": {"nvidia.com/gpu": gpus}}}
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [{"name": "worker", "count": 1, "template": {"spec": {"containers": [container]}}}],
        "priority": priority,
    }
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload", "metadata": {"name": name}, "spec": spec}


def create_workload(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", body)


def test_cluster_status_shows_kueue_healthy_at_its_pinned_version(kueue: control_plane.ClusterState) -> None:
    rows = {row["component"]: row for row in cluster_status.status(TEST_CLUSTER_NAME)}
    assert rows["kueue"]["health"] == "ok"
    assert rows["kueue"]["version"] == "v0.17.0"
    assert rows["kueue"]["process"] == "running"


def test_a_workload_waits_for_quota_and_its_position_is_visible(
    kube: Kube, namespace: str, queues: Queues, cluster: ClusterUnderTest
) -> None:
    flavor = queues.flavor()
    cluster_queue = queues.cluster_queue("gpus", flavor, gpus=8)
    queues.local_queue("team", cluster_queue)
    create_workload(kube, namespace, workload("first", "team", gpus=6))
    admitted = wait_until(
        lambda: holds(queues.workload("first"), "Admitted") and queues.workload("first"),
        60,
        "the first Workload to be admitted",
    )
    assignment = admitted["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"]["nvidia.com/gpu"] == flavor
    create_workload(kube, namespace, workload("second", "team", gpus=6))
    waiting = wait_until(
        lambda: condition(queues.workload("second"), "QuotaReserved"), 60, "Kueue to say why the second Workload waits"
    )
    assert waiting["status"] == "False" and "insufficient unused quota" in waiting["message"]
    pending = wait_until(lambda: pending_workloads(cluster, namespace, "team"), 60, "the visibility API to list it")
    assert [(p["metadata"]["name"], p["positionInLocalQueue"]) for p in pending] == [("second", 0)]
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", "first")
    wait_until(lambda: holds(queues.workload("second"), "Admitted"), 60, "the second Workload to be admitted")


def test_kueues_validating_webhook_answers_through_the_api_server(queues: Queues) -> None:
    flavor = queues.flavor()
    resources = [{"name": "memory", "nominalQuota": "1Gi"}]  # covered is cpu: only Kueue's webhook checks the order
    group = {"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": resources}]}
    with pytest.raises(ApiException) as error:
        queues.create("ClusterQueue", queues.name("bad"), {"resourceGroups": [group]})
    assert error.value.status in (400, 403, 422)
    message = json.loads(error.value.body)["message"]
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in message
    assert "must match the name in coveredResources" in message


def test_workloads_are_served_in_v1beta1_through_kueues_conversion_webhook(
    kube: Kube, namespace: str, queues: Queues
) -> None:
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(), gpus=8)
    queues.local_queue("team", cluster_queue)
    create_workload(kube, namespace, workload("converted", "team", gpus=1))
    old = kube.custom.get_namespaced_custom_object(GROUP, "v1beta1", namespace, "workloads", "converted")
    assert old["apiVersion"] == f"{GROUP}/v1beta1"
    assert old["spec"]["podSets"][0]["count"] == 1


def test_a_restarted_kueue_keeps_admissions_and_admits_what_came_while_it_was_down(
    kube: Kube, namespace: str, queues: Queues, kueue: control_plane.ClusterState
) -> None:
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(), gpus=8)
    queues.local_queue("team", cluster_queue)
    create_workload(kube, namespace, workload("before", "team", gpus=4))
    wait_until(lambda: holds(queues.workload("before"), "Admitted"), 60, "the first Workload to be admitted")
    run.stop_process(kueue)
    assert not run.is_healthy(kueue)
    # Kueue's webhooks fail closed: while it is down, Workloads cannot be created (what a Kueue pod restart means).
    with pytest.raises(ApiException):
        create_workload(kube, namespace, workload("refused", "team", gpus=1))
    run.ensure_running(kueue, say=lambda _: None)
    create_workload(kube, namespace, workload("after", "team", gpus=4))
    wait_until(lambda: holds(queues.workload("after"), "Admitted"), 60, "the Workload created after the restart")
    assert holds(queues.workload("before"), "Admitted")
