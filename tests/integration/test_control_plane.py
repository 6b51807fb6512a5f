"""The local control plane is real: health endpoints, CRDs with validation, garbage collection, scheduling onto
fake nodes with simulated pod lifecycles (docs/local-cluster.md), RBAC and volume provisioning."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.kube import Kube, restricted_pod, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("endpoint", ["/readyz", "/livez", "/healthz"])
def test_apiserver_health_endpoints_answer_ok(cluster: ClusterUnderTest, endpoint: str) -> None:
    answer = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", "get", "--raw", endpoint],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert answer.stdout.strip() == "ok"


def test_fake_nodes_are_ready_and_advertise_gpus(kube: Kube) -> None:
    nodes = kube.core.list_node(label_selector="type=kwok").items
    assert len(nodes) >= 4
    for node in nodes:
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.metadata.labels["accelerator"] == "nvidia-gpu"


def test_crd_is_served_and_its_schema_validates(kube: Kube, namespace: str) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    kube.extensions.create_custom_resource_definition(crd)
    try:
        wait_until(lambda: _established(kube, crd["metadata"]["name"]), 30, "the CRD to be Established")
        good = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "ok"},
            "spec": {"size": 3},
        }
        wait_until(lambda: _try_create(kube, group, namespace, good), 30, "the new resource to be served")
        stored = kube.custom.get_namespaced_custom_object(group, "v1", namespace, "widgets", "ok")
        assert stored["spec"]["size"] == 3
        bad = {**good, "metadata": {"name": "bad"}, "spec": {"size": 0}}
        with pytest.raises(ApiException) as rejected:
            kube.custom.create_namespaced_custom_object(group, "v1", namespace, "widgets", bad)
        assert rejected.value.status == 422
        assert "spec.size" in rejected.value.body
    finally:
        kube.extensions.delete_custom_resource_definition(crd["metadata"]["name"])


def _established(kube: Kube, name: str) -> bool:
    conditions = kube.extensions.read_custom_resource_definition(name).status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _try_create(kube: Kube, group: str, namespace: str, body: dict) -> bool:
    try:
        kube.custom.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_owned_pod_is_garbage_collected_with_its_owner(kube: Kube, namespace: str) -> None:
    owner = kube.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    pod = restricted_pod("owned")
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner.metadata.uid,
            "blockOwnerDeletion": True,
        }
    ]
    kube.core.create_namespaced_pod(namespace, pod)
    wait_until(lambda: kube.pod_phase(namespace, "owned") == "Running", 60, "the owned pod to run")
    kube.core.delete_namespaced_config_map("owner", namespace)
    wait_until(lambda: kube.pod_or_none(namespace, "owned") is None, 60, "garbage collection of the pod")


def test_pod_is_scheduled_runs_then_succeeds_after_its_annotated_delay(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("trainer", {"sim.ml.example.com/complete-after": "3s"}))
    running = wait_until(lambda: _pod_in_phase(kube, namespace, "trainer", "Running"), 60, "Running")
    assert running.spec.node_name.startswith("tj-node-")
    assert running.status.pod_ip
    done = wait_until(lambda: _pod_in_phase(kube, namespace, "trainer", "Succeeded"), 60, "Succeeded")
    assert done.status.container_statuses[0].state.terminated.exit_code == 0
    elapsed = done.status.container_statuses[0].state.terminated.finished_at - running.status.start_time
    assert elapsed.total_seconds() >= 2


def test_pod_without_completion_annotation_keeps_running(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("forever"))
    wait_until(lambda: _pod_in_phase(kube, namespace, "forever", "Running"), 60, "Running")
    kube.core.create_namespaced_pod(namespace, restricted_pod("witness", {"sim.ml.example.com/complete-after": "2s"}))
    wait_until(lambda: _pod_in_phase(kube, namespace, "witness", "Succeeded"), 60, "the witness to finish")
    assert kube.pod_phase(namespace, "forever") == "Running"


def test_pod_marked_for_failure_ends_failed_with_the_annotated_exit_code(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(
        namespace,
        restricted_pod(
            "crash",
            {
                "sim.ml.example.com/fail": "true",
                "sim.ml.example.com/fail-after": "1s",
                "sim.ml.example.com/exit-code": "137",
                "sim.ml.example.com/reason": "OOMKilled",
                "sim.ml.example.com/complete-after": "1s",
            },
        ),
    )
    failed = wait_until(lambda: _pod_in_phase(kube, namespace, "crash", "Failed"), 60, "Failed")
    terminated = failed.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")


def test_running_pod_annotated_for_failure_later_fails(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("later"))
    wait_until(lambda: _pod_in_phase(kube, namespace, "later", "Running"), 60, "Running")
    kube.core.patch_namespaced_pod(
        "later",
        namespace,
        {"metadata": {"annotations": {"sim.ml.example.com/fail": "true", "sim.ml.example.com/exit-code": "3"}}},
    )
    failed = wait_until(lambda: _pod_in_phase(kube, namespace, "later", "Failed"), 60, "Failed")
    assert failed.status.container_statuses[0].state.terminated.exit_code == 3


def test_simulated_eviction_sets_disruption_target(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("evicted", {"sim.ml.example.com/evict": "true"}))
    pod = wait_until(lambda: _pod_in_phase(kube, namespace, "evicted", "Failed"), 60, "eviction")
    assert pod.status.reason == "Evicted"
    disruption = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert disruption.status == "True"


def test_eviction_api_removes_the_pod(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("drained"))
    wait_until(lambda: _pod_in_phase(kube, namespace, "drained", "Running"), 60, "Running")
    kube.core.create_namespaced_pod_eviction(
        "drained",
        namespace,
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "drained", "namespace": namespace},
        },
    )
    wait_until(lambda: kube.pod_or_none(namespace, "drained") is None, 60, "the evicted pod to be gone")


def test_deleting_a_running_pod_completes(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, restricted_pod("doomed"))
    wait_until(lambda: _pod_in_phase(kube, namespace, "doomed", "Running"), 60, "Running")
    kube.core.delete_namespaced_pod("doomed", namespace)
    wait_until(lambda: kube.pod_or_none(namespace, "doomed") is None, 60, "deletion to complete")


def test_unprivileged_service_account_is_denied_by_rbac(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    token = kube.core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    as_nobody = kube.with_token(token)
    with pytest.raises(ApiException) as denied:
        as_nobody.core.list_namespaced_pod(namespace)
    assert denied.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in denied.value.body
    kube.rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
    )
    kube.rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "nobody-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": namespace}],
        },
    )
    wait_until(lambda: _can_list_pods(as_nobody, namespace), 30, "the RoleBinding to take effect")
    with pytest.raises(ApiException) as still_denied:
        as_nobody.core.delete_collection_namespaced_pod(namespace)
    assert still_denied.value.status == 403


def _can_list_pods(kube: Kube, namespace: str) -> bool:
    try:
        kube.core.list_namespaced_pod(namespace)
    except ApiException:
        return False
    return True


def test_pvc_binds_through_the_default_storage_class_and_its_pod_runs(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "checkpoints"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "2Gi"}}},
        },
    )
    claim = wait_until(lambda: _bound_claim(kube, namespace, "checkpoints"), 60, "the claim to bind")
    assert claim.spec.storage_class_name == "standard"
    assert claim.status.capacity["storage"] == "2Gi"
    pod = restricted_pod(
        "uses-volume", volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}}]
    )
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "ckpt", "mountPath": "/checkpoints"}]
    kube.core.create_namespaced_pod(namespace, pod)
    wait_until(lambda: _pod_in_phase(kube, namespace, "uses-volume", "Running"), 60, "the pod to run")


def _bound_claim(kube: Kube, namespace: str, name: str):
    claim = kube.core.read_namespaced_persistent_volume_claim(name, namespace)
    return claim if claim.status.phase == "Bound" else None


def _pod_in_phase(kube: Kube, namespace: str, name: str, phase: str):
    pod = kube.pod_or_none(namespace, name)
    return pod if pod is not None and pod.status.phase == phase else None
