"""The examples' real launchers on the local process nodes, with exactly the env the operator injects: torchrun
(PyTorch DDP over gloo), jax.distributed, TensorFlow's MultiWorkerMirroredStrategy (TF_CONFIG) and XGBoost's
collective each run a collective whose result proves that every rank joined; the chief's progress and checkpoints
reach the status through the SDK; and an XGBoost worker SIGKILLed mid-run makes the operator restart the gang,
which resumes from the newest checkpoint and Succeeds.

Logs, DNS between pods and graceful deletion of a pod are the local node's own tests (test_local_node_*.py); here
they are used for real: every launcher finds worker 0 by its DNS name, what the ranks did is read back from their
logs through the API server, and deleting a running job ends its training processes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.jobs import create_job, delete_job, get_job, job_pods
from tests.kube import Kube, wait_until
from tests.local_node import kill_worker, worker_processes
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def manifest(framework: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "examples" / framework / "trainingjob-local.yaml").read_text())


def collective_checks(log: str) -> list[dict[str, Any]]:
    """The `collective check: {...}` lines a worker logged (one per attempt)."""
    marker = "collective check: "
    return [json.loads(line.split(marker, 1)[1]) for line in log.splitlines() if marker in line]


def assert_every_rank_joined(kube: Kube, namespace: str, job: str, workers: int) -> None:
    """Each worker's all-reduce (or all-gather) of rank + 1 summed to n(n+1)/2: all n ranks took part."""
    ranks = set()
    for index in range(workers):
        checks = collective_checks(log_of(kube, namespace, f"{job}-worker-{index}"))
        assert checks, f"worker {index} logged no collective check"
        last = checks[-1]
        assert (last["worldSize"], last["rankSum"]) == (workers, workers * (workers + 1) // 2), last
        ranks.add(last["rank"])
    assert ranks == set(range(workers))


def assert_finished_with_progress(status: dict[str, Any], epochs: int) -> None:
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Succeeded"], status["conditions"]
    assert (status["progress"]["epoch"], status["progress"]["percent"]) == (epochs, 100.0), status["progress"]
    assert status["lastCheckpoint"]["epoch"] == epochs, status.get("lastCheckpoint")


@pytest.mark.parametrize("framework", ["pytorch", "jax", "tensorflow"])
def test_the_launcher_joins_every_rank_and_the_chief_reports_to_the_end(
    kube: Kube, namespace: str, framework: str
) -> None:
    body = manifest(framework)
    job, workers = body["metadata"]["name"], body["spec"]["workers"]
    create_job(kube, namespace, body)
    status = wait_status(kube, namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded")
    assert_every_rank_joined(kube, namespace, job, workers)
    assert_finished_with_progress(status, body["spec"]["hyperparameters"]["epochs"])
    assert status.get("restartCount", 0) == 0


def test_a_killed_xgboost_worker_restarts_the_gang_which_resumes_from_the_checkpoint(
    kube: Kube, namespace: str
) -> None:
    body = manifest("xgboost")
    job, workers = body["metadata"]["name"], body["spec"]["workers"]
    epochs = body["spec"]["hyperparameters"]["epochs"] = 8
    create_job(kube, namespace, body)
    wait_status(kube, namespace, job, lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) >= 2, "a checkpoint")
    assert_every_rank_joined(kube, namespace, job, workers)
    kill_worker(namespace, job, 1)  # SIGKILL, as the OOM killer would

    status = wait_status(kube, namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded", RUN_TIMEOUT)
    assert status["restartCount"] == 1, status
    assert_every_rank_joined(kube, namespace, job, workers)  # the new attempt's collective
    assert_finished_with_progress(status, epochs)
    assert status["progress"]["metrics"]["accuracy"] > 0.85

    # Worker 0 of the new attempt resumed after the last checkpoint it found instead of starting over.
    logs = log_of(kube, namespace, f"{job}-worker-0")
    resumed = [line for line in logs.splitlines() if "resuming from" in line]
    assert len(resumed) == 1 and "at epoch 1 " not in resumed[0], logs[-2000:]
    trained = [int(found[1]) for found in re.finditer(r" epoch (\d+)/\d+ \(", logs)]
    assert trained and trained[0] > 1 and trained[-1] == epochs, trained
    final = json.loads(next(line for line in logs.splitlines() if "final: " in line).split("final: ", 1)[1])
    assert final["accuracy"] == pytest.approx(status["progress"]["metrics"]["accuracy"])


def test_deleting_a_training_job_ends_its_real_processes_and_lets_it_go(kube: Kube, namespace: str) -> None:
    """The operator deletes the workers (their processes get SIGTERM within the grace period) before it removes
    its finalizer; nothing of the training keeps running on the machine."""
    body = manifest("xgboost")
    job, workers = body["metadata"]["name"], body["spec"]["workers"]
    body["spec"]["hyperparameters"]["epochs"] = 100  # far from done when it is deleted
    create_job(kube, namespace, body)
    wait_status(kube, namespace, job, lambda s: (s.get("progress") or {}).get("epoch", 0) >= 1, "an epoch")
    assert all(worker_processes(namespace, job, index) for index in range(workers))

    delete_job(kube, namespace, job)
    wait_until(lambda: get_job(kube, namespace, job) is None, 60, "the job to be gone")
    wait_until(lambda: not job_pods(kube, namespace, job), 60, "its pods to be gone")
    left = {index: worker_processes(namespace, job, index) for index in range(workers)}
    assert not any(left.values()), f"processes still running after the job was deleted: {left}"
