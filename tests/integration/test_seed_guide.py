"""Seed 002's job on the local process node, for real: examples/seed-guide/trainingjob-local.yaml (apiVersion v1, the
guide's field names, the guide's launch script verbatim, checkpoint.storage.storageClass) trains an MLP on the
digits with torch.distributed.launch across two workers that find each other only through the guide's names;
SIGKILLed mid-training it is restarted by the operator, resumes from the guide's checkpoint-latest.pt and
Succeeds."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.integration.v1_support import create
from tests.jobs import job_pods
from tests.kube import Kube, wait_until
from tests.local_node import kill_worker
from tests.operator_harness import REPO
from tests.real_roles import log_of, log_tails, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

MANIFEST = REPO / "examples" / "seed-guide" / "trainingjob-local.yaml"
EPOCH = re.compile(r"^rank (\d): epoch (\d+)/(\d+) loss [\d.]+ accuracy ([\d.]+)$", re.MULTILINE)


def guide_job() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


def saved_epochs(log: str) -> list[int]:
    return [int(found) for found in re.findall(r"^saved checkpoint-epoch-(\d+)\.pt$", log, re.MULTILINE)]


@pytest.mark.timeout(900)  # two real runs of torch.distributed.launch; a loaded machine starts torch slowly
def test_the_guides_job_trains_with_its_own_script_and_resumes_after_a_sigkill(kube: Kube, namespace: str) -> None:
    body = guide_job()
    name = body["metadata"]["name"]
    epochs = body["spec"]["hyperparameters"]["epochs"] = 20  # long enough to be killed mid-training
    create(kube, namespace, body)  # in v1, as the guide writes it
    claims = wait_until(
        lambda: kube.core.list_namespaced_persistent_volume_claim(namespace).items, 60, "the checkpoint claim"
    )
    assert [(c.metadata.name, c.spec.storage_class_name) for c in claims] == [(f"{name}-checkpoints", "standard")]

    def checkpointed() -> list[int]:
        pods = job_pods(kube, namespace, name)
        return saved_epochs(log_of(kube, namespace, f"{name}-worker-0")) if pods else []

    try:
        wait_until(lambda: len(checkpointed()) >= 2, 300, "two checkpoints of the first attempt")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{log_tails(kube, namespace, name)}") from None
    first_worker_1 = log_of(kube, namespace, f"{name}-worker-1")
    assert "Waiting for master node..." in first_worker_1 and "Starting training as rank 1" in first_worker_1
    kill_worker(namespace, name, 0)  # SIGKILL every process of worker 0, as the OOM killer would

    status = wait_status(kube, namespace, name, lambda s: s.get("phase") == "Succeeded", "Succeeded", 420)
    assert status["restartCount"] == 1, status
    log = log_of(kube, namespace, f"{name}-worker-0")
    resumed = re.findall(r"^resumed from checkpoint-epoch-(\d+)\.pt at epoch (\d+)$", log, re.MULTILINE)
    assert len(resumed) == 1, log[-2000:]  # worker 0 runs one process (--nproc_per_node=$GPUS_PER_WORKER, 1)
    checkpoint, next_epoch = map(int, resumed[0])
    assert checkpoint >= 2 and next_epoch == checkpoint + 1
    trained = [(int(rank), int(epoch)) for rank, epoch, _, _ in EPOCH.findall(log)]
    assert trained[0] == (0, next_epoch) and trained[-1] == (0, epochs), "resumed, not started over"
    final_accuracy = float(EPOCH.findall(log)[-1][3])
    assert final_accuracy > 0.9, log[-1000:]
    assert saved_epochs(log)[-1] == epochs
