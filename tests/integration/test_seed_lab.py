"""Seed 001's (the Go lab's) "Test the Operator" steps, with its kubectl commands run exactly as the lab prints them,
against its `pytorch-mnist` sample in namespace `ml-jobs`: the label checks find the workers and their logs, and
deleting the job cleans up its pods.

The sample differs from the lab's in what a local process node needs to run it for real: the stdlib Python image
(the lab's pytorch/pytorch image is not on this machine), a program that prints and waits, placement on the local
nodes, small requests, and a non-root user. Everything the lab's commands rely on is as the lab wrote it.
"""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

NAMESPACE = "ml-jobs"
WORKER = """
import os, time
rank, world = os.environ["RANK"], os.environ["WORLD_SIZE"]
print(f"worker {rank} of {world} learningRate={os.environ['HYPERPARAM_LEARNINGRATE']}", flush=True)
time.sleep(600)
"""


def lab_sample() -> dict[str, Any]:
    """config/samples/ml_v1alpha1_trainingjob.yaml of the lab, made runnable on a local process node."""
    return {
        "apiVersion": "ml.example.com/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "pytorch-mnist", "namespace": NAMESPACE},
        "spec": {
            "framework": "pytorch",
            "image": STDLIB_IMAGE,
            "command": ["python3", "-u", "-c", WORKER],
            "args": ["--epochs=10", "--batch-size=64"],
            "workers": 2,
            "gpuPerWorker": 0,
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
            "hyperparameters": {"learningRate": "0.001", "optimizer": "adam"},
            "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),
            "scheduling": {"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
        },
    }


def namespace_gone(kube: Kube) -> bool:
    try:
        kube.core.read_namespace(NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


@pytest.fixture
def ml_jobs(kube: Kube) -> Iterator[str]:
    """The lab's namespace (its commands name it), created as the lab's Step 2 does and deleted afterwards."""
    wait_until(lambda: namespace_gone(kube), 120, f"namespace {NAMESPACE} of an earlier run to be gone")
    labels = {"pod-security.kubernetes.io/enforce": "restricted", "ml.example.com/test": "true"}
    kube.core.create_namespace({"metadata": {"name": NAMESPACE, "labels": labels}})
    wait_until(lambda: kube.has_service_account(NAMESPACE, "default"), 60, "the namespace's default ServiceAccount")
    yield NAMESPACE
    kube.core.delete_namespace(NAMESPACE)


def run_lab(cluster: ClusterUnderTest, command: str) -> subprocess.CompletedProcess[str]:
    """One of the lab's command lines, run by a shell as printed (kubectl found on PATH, the cluster by KUBECONFIG)."""
    path = f"{Path(cluster.kubectl).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    environment = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PATH": path}
    result = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=60, env=environment, check=False
    )
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result


def lab(cluster: ClusterUnderTest, command: str) -> str:
    return run_lab(cluster, command).stdout


def running_pods(cluster: ClusterUnderTest, count: int) -> list[str] | None:
    """`kubectl get pods -n ml-jobs -l trainingjob.ml.example.com/worker` once it lists `count` Running pods."""
    rows = [
        line.split()
        for line in lab(cluster, "kubectl get pods -n ml-jobs -l trainingjob.ml.example.com/worker").splitlines()
    ]
    pods = [row[0] for row in rows[1:] if row[2] == "Running"]
    return sorted(pods) if len(pods) == count and len(rows) == count + 1 else None


def logs_of_every_worker(cluster: ClusterUnderTest, count: int) -> list[str] | None:
    lines = lab(cluster, "kubectl logs -n ml-jobs -l trainingjob.ml.example.com/worker").splitlines()
    expected = [f"worker {rank} of {count} learningRate=0.001" for rank in range(count)]
    return lines if sorted(lines) == expected else None


def test_the_labs_checks_find_the_workers_and_their_logs(
    cluster: ClusterUnderTest, kube: Kube, ml_jobs: str, tmp_path: Path
) -> None:
    sample = tmp_path / "ml_v1alpha1_trainingjob.yaml"
    sample.write_text(yaml.safe_dump(lab_sample()))
    lab(cluster, f"kubectl apply -f {sample}")

    pods = wait_until(lambda: running_pods(cluster, 2), 120, "the lab's check to list 2 running workers")
    assert pods == ["pytorch-mnist-worker-0", "pytorch-mnist-worker-1"]
    wait_until(lambda: logs_of_every_worker(cluster, 2), 60, "the lab's logs check to show both workers")
    assert "pytorch-mnist" in lab(cluster, "kubectl get trainingjobs -n ml-jobs")
    assert "Events:" in lab(cluster, "kubectl describe trainingjob pytorch-mnist -n ml-jobs")

    labels = kube.core.read_namespaced_pod("pytorch-mnist-worker-1", ml_jobs).metadata.labels
    assert labels[k.LABEL_LAB_WORKER] == "pytorch-mnist"

    lab(cluster, "kubectl delete trainingjob pytorch-mnist -n ml-jobs")
    wait_until(lambda: no_pods_left(cluster), 120, "the lab's cleanup check to find no pods")


def no_pods_left(cluster: ClusterUnderTest) -> bool:
    """The lab's "Verify cleanup": kubectl says "No resources found in ml-jobs namespace." (on stderr)."""
    result = run_lab(cluster, "kubectl get pods -n ml-jobs")
    return not result.stdout.strip() and "No resources found" in result.stderr
