"""A TrainingJob's life through the real operator: children, env per rank, phases, events, failure, cleanup."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.jobs import (
    SIM,
    create_job,
    delete_job,
    env_of,
    event_reasons,
    get_job,
    job_manifest,
    job_pods,
    kubectl,
    live_pods,
    wait_phase,
)
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def test_pytorch_job_with_gpus_runs_to_success(kube: Kube, namespace: str, cluster) -> None:
    create_job(
        kube,
        namespace,
        job_manifest(
            "mnist",
            workers=4,
            gpuPerWorker=1,
            complete_after="5s",
            hyperparameters={"learningRate": 0.01, "epochs": 3, "amp": True},
            model="resnet50",
            dataset="imagenet",
        ),
    )
    running = wait_phase(kube, namespace, "mnist", "Running")
    assert running["status"]["startTime"]
    pods = job_pods(kube, namespace, "mnist")
    assert [p.metadata.name for p in pods] == [f"mnist-worker-{i}" for i in range(4)]
    master = f"mnist-worker-0.mnist-workers.{namespace}.svc"
    for rank, pod in enumerate(pods):
        env = env_of(pod)
        assert {
            key: env[key]
            for key in (
                "MASTER_ADDR",
                "MASTER_PORT",
                "WORLD_SIZE",
                "RANK",
                "PET_NNODES",
                "PET_NODE_RANK",
                "PET_NPROC_PER_NODE",
                "PET_MASTER_ADDR",
                "PET_MASTER_PORT",
            )
        } == {
            "MASTER_ADDR": master,
            "MASTER_PORT": "29500",
            "WORLD_SIZE": "4",
            "RANK": str(rank),
            "PET_NNODES": "4",
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": "1",
            "PET_MASTER_ADDR": master,
            "PET_MASTER_PORT": "29500",
        }
        assert env["HYPERPARAM_LEARNING_RATE"] == "0.01" and env["HYPERPARAM_AMP"] == "true"
        assert env["MODEL"] == "resnet50" and env["DATASET"] == "imagenet"
        assert env["TRAININGJOB_WORKER_INDEX"] == str(rank) and env["DISTRIBUTED_BACKEND"] == "nccl"
        container = pod.spec.containers[0]
        assert container.name == "trainer"
        assert container.resources.limits["nvidia.com/gpu"] == "1"
        assert pod.spec.node_selector is None, "the GPU request alone finds the GPU nodes"
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"mnist-worker-{rank}", "mnist-workers")
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.controller, owner.block_owner_deletion) == (
            "TrainingJob",
            "mnist",
            True,
            True,
        )
        assert pod.metadata.labels[k.LABEL_JOB_NAME] == "mnist"
        assert pod.spec.restart_policy == "Never"
    service = kube.core.read_namespaced_service("mnist-workers", namespace)
    assert service.spec.cluster_ip == "None" and service.spec.publish_not_ready_addresses
    assert service.spec.selector is None, "the operator publishes the workers' addresses, not the controller"
    published = wait_until(lambda: _published(kube, namespace, "mnist-workers", 4), 30, "the workers' EndpointSlice")
    addresses = {p.metadata.name: p.status.pod_ip for p in job_pods(kube, namespace, "mnist")}
    assert published == {name: (name, address) for name, address in addresses.items()}
    config = kube.core.read_namespaced_config_map("mnist-config", namespace)
    assert json.loads(config.data["hyperparameters.json"]) == {"learningRate": 0.01, "epochs": 3, "amp": True}
    table = kubectl(cluster, "get", "trainingjobs.v1alpha1.ml.example.com", "-n", namespace)  # v1alpha1's columns
    assert table.split("\n")[0].split()[:4] == ["NAME", "FRAMEWORK", "WORKERS", "PHASE"]
    assert "mnist" in table and "pytorch" in table and "Running" in table

    done = wait_phase(kube, namespace, "mnist", "Succeeded")
    status = done["status"]
    assert status["completionTime"] >= status["startTime"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Succeeded"] == "True"
    assert [w["phase"] for w in status["workerStatuses"]] == ["Succeeded"] * 4
    assert status["observedGeneration"] == done["metadata"]["generation"]
    reasons = wait_until(
        lambda: _has_all(
            event_reasons(kube, namespace, "mnist"), {"WorkersCreated", "TrainingStarted", "TrainingSucceeded"}
        ),
        30,
        "events",
    )
    assert reasons


def _published(kube: Kube, namespace: str, service: str, count: int) -> dict[str, tuple[str, str]] | None:
    """Pod name -> (hostname, address) over every EndpointSlice of the Service, once all `count` are there (and
    only if kube-controller-manager made none of its own)."""
    slices = client.DiscoveryV1Api(kube.api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    assert {s.metadata.labels["endpointslice.kubernetes.io/managed-by"] for s in slices.items} <= {
        "trainingjob-operator.ml.example.com"
    }
    found = {e.target_ref.name: (e.hostname, a) for s in slices.items for e in s.endpoints or [] for a in e.addresses}
    return found if len(found) == count else None


def _has_all(reasons: list[str], wanted: set[str]) -> list[str] | None:
    return reasons if wanted <= set(reasons) else None


@pytest.mark.parametrize("framework", ["tensorflow", "xgboost", "jax", "mpi"])
def test_each_framework_gets_its_contract_and_succeeds(kube: Kube, namespace: str, framework: str) -> None:
    create_job(kube, namespace, job_manifest("fw", framework=framework, workers=3, complete_after="3s"))
    wait_phase(kube, namespace, "fw", "Running")
    envs = [env_of(p) for p in job_pods(kube, namespace, "fw")]
    hosts = [f"fw-worker-{i}.fw-workers.{namespace}.svc" for i in range(3)]
    if framework == "tensorflow":
        configs = [json.loads(env["TF_CONFIG"]) for env in envs]
        assert all(c["cluster"] == {"worker": [f"{h}:29500" for h in hosts]} for c in configs)
        assert [c["task"] for c in configs] == [{"type": "worker", "index": i} for i in range(3)]
    elif framework == "xgboost":
        assert [
            (e["DMLC_TRACKER_URI"], e["DMLC_TRACKER_PORT"], e["DMLC_TASK_ID"], e["DMLC_NUM_WORKER"]) for e in envs
        ] == [(hosts[0], "29500", str(i), "3") for i in range(3)]
    elif framework == "jax":
        assert [(e["JAX_COORDINATOR_ADDRESS"], e["JAX_NUM_PROCESSES"], e["JAX_PROCESS_ID"]) for e in envs] == [
            (f"{hosts[0]}:29500", "3", str(i)) for i in range(3)
        ]
    else:
        hostfile = kube.core.read_namespaced_config_map("fw-config", namespace).data["hostfile"]
        assert hostfile.splitlines() == [f"{h} slots=1" for h in hosts]
        assert all(e["OMPI_MCA_orte_default_hostfile"] == "/etc/trainingjob/hostfile" for e in envs)
    wait_phase(kube, namespace, "fw", "Succeeded")


def test_failing_worker_fails_the_job_with_its_exit_code(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("crash", workers=3, complete_after=None, restartPolicy="Never"))
    wait_phase(kube, namespace, "crash", "Running")
    kube.core.patch_namespaced_pod(
        "crash-worker-1",
        namespace,
        {"metadata": {"annotations": {f"{SIM}/fail": "true", f"{SIM}/exit-code": "3", f"{SIM}/reason": "Error"}}},
    )
    failed = wait_phase(kube, namespace, "crash", "Failed")
    status = failed["status"]
    worker = next(w for w in status["workerStatuses"] if w["workerId"] == 1)
    assert (worker["exitCode"], worker["reason"], worker["phase"]) == (3, "Error", "Failed")
    condition = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "WorkerFailed" and "exit code 3" in condition["message"]
    wait_until(lambda: "WorkerFailed" in event_reasons(kube, namespace, "crash"), 30, "a WorkerFailed event")
    # The other workers would wait forever on a dead peer: they are cleaned up.
    wait_until(
        lambda: all(p.status.phase != "Running" for p in live_pods(kube, namespace, "crash")),
        30,
        "running workers to be removed",
    )


def test_deleting_the_job_removes_every_child(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("gone", workers=2, complete_after=None))
    wait_phase(kube, namespace, "gone", "Running")
    assert k.FINALIZER in get_job(kube, namespace, "gone")["metadata"]["finalizers"]
    delete_job(kube, namespace, "gone")
    wait_until(lambda: get_job(kube, namespace, "gone") is None, 60, "the job to be deleted")
    wait_until(lambda: not job_pods(kube, namespace, "gone"), 60, "pods to be gone")
    wait_until(lambda: not kube.core.list_namespaced_service(namespace).items, 60, "the Service to be gone")
    wait_until(
        lambda: (
            not [c for c in kube.core.list_namespaced_config_map(namespace).items if c.metadata.name == "gone-config"]
        ),
        60,
        "the ConfigMap to be gone",
    )


def test_invalid_spec_the_schema_cannot_catch_fails_with_invalid_spec(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("clash", hyperparameters={"learningRate": 0.1, "learning_rate": 0.2}))
    failed = wait_phase(kube, namespace, "clash", "Failed")
    condition = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "InvalidSpec"
    assert "HYPERPARAM_LEARNING_RATE" in condition["message"]
    wait_until(lambda: "InvalidSpec" in event_reasons(kube, namespace, "clash"), 30, "an InvalidSpec event")
    assert job_pods(kube, namespace, "clash") == []


def test_pod_the_api_server_rejects_ends_in_invalid_spec(kube: Kube, namespace: str) -> None:
    # PodSecurity `restricted` in the test namespace refuses a privileged override: only the API server knows.
    create_job(kube, namespace, job_manifest("priv", securityContext={"privileged": True}))
    failed = wait_phase(kube, namespace, "priv", "Failed")
    condition = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "InvalidSpec" and "PodSecurity" in condition["message"]
