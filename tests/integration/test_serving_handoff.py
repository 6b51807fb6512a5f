"""Train -> serve on the local process nodes, for real: a TrainingJob trains softmax regression on scikit-learn's
digits (examples/serving/train_digits.py) onto its checkpoint volume; an LLMModel naming that job waits until it has
Succeeded, then its Deployment mounts the job's checkpoint claim and the example's model server loads the final
checkpoint and answers KServe V1 predictions, checked against held-out labels the training wrote."""

from __future__ import annotations

import copy
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

TRAIN_IMAGE = "registry.example/trainingjob-examples/serving:0.1"
PLACEMENT = {"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]}


def training_job(name: str) -> dict[str, Any]:
    return job_manifest(
        name,
        workers=1,
        complete_after=None,
        image=TRAIN_IMAGE,
        command=["python3", "/app/train_digits.py"],
        hyperparameters={"epochs": "4"},
        checkpoint={"enabled": True, "storage": {"type": "pvc", "size": "100Mi", "accessModes": ["ReadWriteOnce"]}},
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        scheduling=copy.deepcopy(PLACEMENT),
    )


def serving_model(name: str, job: str) -> dict[str, Any]:
    return {
        "apiVersion": k.MODEL_API_VERSION,
        "kind": k.MODEL_KIND,
        "metadata": {"name": name},
        "spec": {
            "modelName": "digits",
            "replicas": 1,
            "source": {"trainingJob": job},
            "scheduling": copy.deepcopy(PLACEMENT),
        },
    }


def model_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    body = kube.custom.get_namespaced_custom_object(k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, name)
    return body.get("status") or {}


def post(url: str, body: dict[str, Any]) -> dict[str, Any] | None:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.loads(response.read())
    except OSError:
        return None


def test_a_model_trained_by_a_job_is_served_after_the_job_succeeds(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, training_job("digits"))
    kube.custom.create_namespaced_custom_object(
        k.MODEL_GROUP, k.MODEL_VERSION, namespace, k.MODEL_PLURAL, serving_model("digits-server", "digits")
    )
    waiting = wait_until(
        lambda: (s := model_status(kube, namespace, "digits-server")).get("conditions") and s,
        30,
        "the model's first status",
    )
    progressing = next(c for c in waiting["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "WaitingForTraining")
    assert not kube.apps.list_namespaced_deployment(namespace).items  # nothing is served before training ends

    wait_phase(kube, namespace, "digits", "Succeeded", timeout=300)
    claim = kube.core.read_namespaced_persistent_volume_claim("digits-checkpoints", namespace)
    volume = Path(kube.core.read_persistent_volume(claim.spec.volume_name).spec.host_path.path)
    uid = get_job(kube, namespace, "digits")["metadata"]["uid"]
    run = volume / uid  # the run's own directory on the claim, what the server mounts
    assert sorted(p.name for p in run.glob("ckpt-*")) == [f"ckpt-{epoch:08d}.npz" for epoch in range(4)]
    holdout = json.loads((run / "holdout.json").read_text())

    deployment = wait_until(
        lambda: next(iter(kube.apps.list_namespaced_deployment(namespace).items), None), 60, "the Deployment"
    )
    (volume_spec,) = deployment.spec.template.spec.volumes
    assert volume_spec.persistent_volume_claim.claim_name == "digits-checkpoints"
    selector = f"{k.LABEL_MODEL}=digits-server"

    def running_pod() -> Any:
        pods = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
        return next((p for p in pods if p.status.phase == "Running" and p.status.pod_ip), None)

    pod = wait_until(running_pod, 180, "a running model server")
    url = f"http://{pod.status.pod_ip}:{k.DEFAULT_SERVING_PORT}/v1/models/digits:predict"
    answer = wait_until(lambda: post(url, {"instances": holdout["instances"]}), 120, "a prediction")
    predictions = answer["predictions"]
    assert len(predictions) == len(holdout["labels"]) >= 20
    correct = sum(p == label for p, label in zip(predictions, holdout["labels"], strict=True))
    assert correct / len(predictions) >= 0.85, (predictions, holdout["labels"])

    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{k.DEFAULT_SERVING_PORT}/v1/models/digits") as response:
        assert json.loads(response.read()) == {"name": "digits", "ready": True, "checkpoint": "ckpt-00000003.npz"}
    status = wait_until(
        lambda: (s := model_status(kube, namespace, "digits-server")).get("availableReplicas") == 1 and s,
        60,
        "the model to be available",
    )
    assert status["source"] == {
        "trainingJob": "digits",
        "jobPhase": "Succeeded",
        "claimName": "digits-checkpoints",
        "path": uid,
    }
    reasons = {
        e.reason
        for e in kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=digits-server").items
    }
    assert {"SourceReady", "Created"} <= reasons
    endpoints = kube.api.call_api(
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        "GET",
        query_params=[("labelSelector", "kubernetes.io/service-name=digits-server")],
        response_type="object",
        _return_http_data_only=True,
        auth_settings=["BearerToken"],
    )
    addresses = {a for s in endpoints["items"] for e in s.get("endpoints") or [] for a in e["addresses"]}
    assert addresses == {pod.status.pod_ip}  # the model's Service selects the server that answered
