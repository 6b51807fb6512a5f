"""LLMModel against the real local control plane: the seed's manifest applies unchanged and becomes a Deployment of
three GPU replicas (kwok's fake GPU nodes run them) with a status; `kubectl scale` goes through the scale subresource;
an edited Deployment is put back; spec.autoscaling adds and removes an autoscaler of the model."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.jobs import SIM, create_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

SEED = REPO / "examples" / "llmmodel" / "seed.yaml"
NAME = "llama-3-70b"


def kubectl(cluster: ClusterUnderTest, *args: str) -> str:
    result = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def get_model(kube: Kube, namespace: str, name: str = NAME) -> dict[str, Any]:
    return kube.custom.get_namespaced_custom_object(k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, name)


def condition(model: dict[str, Any], condition_type: str) -> tuple[str, str] | None:
    for found in (model.get("status") or {}).get("conditions") or []:
        if found["type"] == condition_type:
            return found["status"], found["reason"]
    return None


def deployment(kube: Kube, namespace: str) -> client.V1Deployment | None:
    try:
        return kube.apps.read_namespaced_deployment(NAME, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def events(kube: Kube, namespace: str) -> list[str]:
    found = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={NAME}").items
    return [e.reason for e in found if e.involved_object.kind == k.MODEL_KIND]


def test_the_seed_applies_unchanged_and_becomes_three_gpu_replicas_with_a_status(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    kubectl(cluster, "apply", "-n", namespace, "-f", str(SEED))
    created = wait_until(lambda: deployment(kube, namespace), 60, "the seed's Deployment")
    assert created.spec.replicas == 3
    server = created.spec.template.spec.containers[0]
    assert server.resources.limits == {k.GPU_RESOURCE: "1"}
    # gpuType H100 -> node labels by the operator's --gpu-type setting (tests/operator_harness.py SERVING_FLAGS)
    assert created.spec.template.spec.node_selector == {"accelerator": "nvidia-gpu"}
    assert created.metadata.owner_references[0].kind == k.MODEL_KIND

    def available() -> dict[str, Any] | None:
        model = get_model(kube, namespace)
        return model if condition(model, "Available") == ("True", "AllReplicasAvailable") else None

    model = wait_until(available, 120, "the model to be Available")
    status = model["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (3, 3, 3)
    assert status["selector"] == f"{k.LABEL_MODEL}={NAME}"
    assert condition(model, "Progressing") == ("False", "RolloutComplete")
    assert condition(model, "Degraded") == ("False", "AsExpected")
    pods = kube.core.list_namespaced_pod(namespace, label_selector=status["selector"]).items
    assert len(pods) == 3
    labels = [kube.core.read_node(p.spec.node_name).metadata.labels for p in pods]
    assert {(node["type"], node["accelerator"]) for node in labels} == {("kwok", "nvidia-gpu")}
    service = kube.core.read_namespaced_service(NAME, namespace)
    assert service.spec.selector == {k.LABEL_MODEL: NAME} and service.spec.ports[0].port == 80
    table = kubectl(cluster, "get", "llmmodel", NAME, "-n", namespace)
    assert table.split("\n")[0].split()[:6] == ["NAME", "MODEL", "GPU", "REPLICAS", "READY", "AVAILABLE"]
    assert table.split("\n")[1].split()[:6] == [NAME, NAME, "H100", "3", "3", "True"]  # MODEL: metadata.name
    explained = kubectl(cluster, "explain", "llmmodel.spec.gpuType")
    assert "GPU model each replica needs" in explained
    assert "Created" in events(kube, namespace)


def test_scale_drift_repair_and_autoscaling(cluster: ClusterUnderTest, kube: Kube, namespace: str) -> None:
    kubectl(cluster, "apply", "-n", namespace, "-f", str(SEED))
    wait_until(lambda: deployment(kube, namespace), 60, "the seed's Deployment")
    kubectl(cluster, "scale", "llmmodel", NAME, "-n", namespace, "--replicas=2")
    wait_until(lambda: deployment(kube, namespace).spec.replicas == 2, 30, "the Deployment to follow the scale")
    scale = kube.custom.get_namespaced_custom_object_scale(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, NAME
    )
    assert scale["spec"]["replicas"] == 2
    wait_until(lambda: get_model(kube, namespace)["status"].get("readyReplicas") == 2, 60, "2 ready replicas")
    scale = kube.custom.get_namespaced_custom_object_scale(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, NAME
    )
    assert scale["status"] == {"replicas": 2, "selector": f"{k.LABEL_MODEL}={NAME}"}

    # Someone edits the Deployment: replicas and image are put back.
    kube.apps.patch_namespaced_deployment(
        NAME,
        namespace,
        {"spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "server", "image": "other:1"}]}}}},
    )

    def repaired() -> bool:
        current = deployment(kube, namespace)
        return current.spec.replicas == 2 and current.spec.template.spec.containers[0].image == k.DEFAULT_SERVING_IMAGE

    wait_until(repaired, 30, "the edited Deployment to be put back")
    wait_until(lambda: "DriftRepaired" in events(kube, namespace), 30, "a DriftRepaired Event")

    # A deleted Service comes back.
    kube.core.delete_namespaced_service(NAME, namespace)
    wait_until(lambda: kube.core.list_namespaced_service(namespace).items, 30, "the Service to come back")

    autoscaling = {"spec": {"autoscaling": {"minReplicas": 2, "maxReplicas": 4}}}
    kube.custom.patch_namespaced_custom_object(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, NAME, autoscaling
    )
    scalers = client.AutoscalingV2Api(kube.api)

    def autoscaler() -> Any:
        found = scalers.list_namespaced_horizontal_pod_autoscaler(namespace).items
        return found[0] if found else None

    hpa = wait_until(autoscaler, 30, "the HorizontalPodAutoscaler")
    target = hpa.spec.scale_target_ref
    assert (target.api_version, target.kind, target.name) == (k.MODEL_API_VERSION, k.MODEL_KIND, NAME)
    assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (2, 4)

    def able_to_scale() -> Any:
        current = autoscaler()
        found = [c for c in (current.status.conditions or []) if c.type == "AbleToScale"] if current else []
        return found[0] if found and found[0].status == "True" else None

    # kube-controller-manager's HPA controller reads the model's scale subresource (no metrics server here, so it
    # never computes a utilization or decides a scale: that part is shape only).
    assert wait_until(able_to_scale, 60, "the HPA controller to read the model's scale").reason == "SucceededGetScale"
    kube.custom.patch_namespaced_custom_object(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, NAME, {"spec": {"autoscaling": None}}
    )
    wait_until(lambda: autoscaler() is None, 30, "the autoscaler to be deleted")
    described = json.loads(kubectl(cluster, "get", "llmmodel", NAME, "-n", namespace, "-o", "json"))
    assert described["status"]["observedGeneration"] == described["metadata"]["generation"]

    # Deleting the model deletes what it owns (controller ownerReferences, garbage collection).
    kubectl(cluster, "delete", "llmmodel", NAME, "-n", namespace)
    wait_until(lambda: deployment(kube, namespace) is None, 60, "the Deployment to be collected")
    wait_until(lambda: not kube.core.list_namespaced_service(namespace).items, 60, "the Service to be collected")


def test_a_model_whose_training_job_fails_is_degraded_and_serves_nothing(kube: Kube, namespace: str) -> None:
    failing = job_manifest(
        "train",
        complete_after=None,
        restartPolicy="Never",
        podAnnotations={f"{SIM}/fail": "true", f"{SIM}/fail-after": "1s"},
        checkpoint={"enabled": True, "storage": {"type": "pvc", "size": "10Mi", "accessModes": ["ReadWriteOnce"]}},
    )
    create_job(kube, namespace, failing)
    model = {
        "apiVersion": k.MODEL_API_VERSION,
        "kind": k.MODEL_KIND,
        "metadata": {"name": "fails"},
        "spec": {"modelName": "m", "source": {"trainingJob": "train"}},
    }
    kube.custom.create_namespaced_custom_object(k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, model)
    wait_phase(kube, namespace, "train", "Failed", timeout=90)

    def degraded() -> dict[str, Any] | None:
        body = get_model(kube, namespace, "fails")
        return body if condition(body, "Degraded") == ("True", "TrainingFailed") else None

    body = wait_until(degraded, 60, "the model to be Degraded")
    assert condition(body, "Available") == ("False", "WaitingForSource")
    assert body["status"]["source"] == {"trainingJob": "train", "jobPhase": "Failed"}
    assert not kube.apps.list_namespaced_deployment(namespace).items
    found = kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=fails").items
    assert ("Warning", "TrainingFailed") in {(e.type, e.reason) for e in found}
