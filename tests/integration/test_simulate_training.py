"""`tj cluster simulate-training` (what `make demo-simulated` runs) against the real operator: the job succeeds only
after the reported progress reached status, and a simulator whose reports are refused fails and leaves the pods
alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ClusterUnderTest
from tests.jobs import SIM, create_job, get_job, job_manifest, live_pods, wait_phase
from tests.kube import Kube
from tests.operator_harness import REPO, RunningOperator
from trainingjob.api import constants as k

pytestmark = pytest.mark.integration


def simulate(cluster: ClusterUnderTest, namespace: str, job: str, epochs: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "trainingjob.cli", "cluster", "simulate-training", job, "-n", namespace]
    command += ["--epochs", str(epochs), "--seconds-per-epoch", "0.2", "--kubeconfig", str(cluster.kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=REPO)


def test_simulated_training_reaches_full_progress_then_succeeds(
    cluster: ClusterUnderTest, kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create_job(kube, namespace, job_manifest("sim", workers=2, complete_after=None))
    wait_phase(kube, namespace, "sim", "Running")

    result = simulate(cluster, namespace, "sim", epochs=3)

    assert result.returncode == 0, result.stderr
    assert "epoch 3/3" in result.stdout and "NOT accepted" not in result.stdout
    status = wait_phase(kube, namespace, "sim", "Succeeded", timeout=60)["status"]
    progress = status["progress"]
    assert (progress["epoch"], progress["totalEpochs"], progress["percent"]) == (3, 3, 100)
    assert set(progress["metrics"]) == {"loss", "accuracy"}
    assert status["lastCheckpoint"]["path"] == "/checkpoints/ckpt-00000003"
    # kwok played the workers: no code ran, and the job says so wherever it is shown.
    assert status["simulated"] is True
    listing = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", "get", "-n", namespace, "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=REPO,
    )
    assert "Succeeded(simulated)" in listing.stdout


def test_refused_reports_fail_the_simulator_and_leave_the_pods_running(
    cluster: ClusterUnderTest, kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create_job(kube, namespace, job_manifest("refused", workers=2, complete_after=None))
    wait_phase(kube, namespace, "refused", "Running")
    # Worker 0 without our job label is no worker of the job for the operator, so it answers every report 403.
    kube.core.patch_namespaced_pod("refused-worker-0", namespace, {"metadata": {"labels": {k.LABEL_JOB_NAME: "x"}}})

    result = simulate(cluster, namespace, "refused", epochs=2)

    assert result.returncode == 1
    assert "did not accept the final report" in result.stderr and "NOT accepted" in result.stdout
    # The simulator completes no pod it could not report for. (The operator, for its part, sees worker 0 leave the
    # job with its label and restarts the gang: that is the job's business, not the simulator's.)
    reporter = kube.core.read_namespaced_pod("refused-worker-0", namespace)
    pods = [reporter, *live_pods(kube, namespace, "refused")]
    assert all(f"{SIM}/complete-after" not in (pod.metadata.annotations or {}) for pod in pods)
    assert reporter.status.phase == "Running"
    assert "progress" not in (get_job(kube, namespace, "refused") or {}).get("status", {})
