"""A suspended multi-worker TensorFlow job (examples/tensorflow/, MultiWorkerMirroredStrategy on the local process
nodes) stops with a checkpoint that its resume starts from.

The example's stop is its own: every worker gets SIGTERM one by one, they agree at the end of the epoch with one
all-reduce that someone was asked to stop, all save that epoch together (a distributed model's save may need every
worker), the chief reports the stop with it, and all exit 143. Until now only unit-tested without a cluster.
"""

from __future__ import annotations

import time

import pytest
import yaml

from tests.jobs import create_job, delete_job, get_job, job_pods, patch_job
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def test_a_suspended_multi_worker_tensorflow_job_stops_with_a_checkpoint_it_then_resumes_from(
    kube: Kube, namespace: str
) -> None:
    body = yaml.safe_load((REPO / "examples" / "tensorflow" / "trainingjob-local.yaml").read_text())
    name = body["metadata"]["name"] = "tf-pause"
    body["spec"]["hyperparameters"]["epochs"] = 400  # far more than the test waits for
    create_job(kube, namespace, body)
    wait_status(kube, namespace, name, lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) >= 2, "epoch 2")
    workers = {pod.metadata.name for pod in job_pods(kube, namespace, name)}
    assert workers == {f"{name}-worker-0", f"{name}-worker-1"}, workers
    asked = time.monotonic()
    patch_job(kube, namespace, name, {"spec": {"suspend": True}})

    def every_worker_gone() -> bool:
        left = {pod.metadata.name for pod in kube.core.list_namespaced_pod(namespace).items}
        return not left & workers

    wait_until(every_worker_gone, 120, "every worker to be gone")
    took = time.monotonic() - asked
    print(f"suspend to every TensorFlow worker gone: {took:.1f}s")
    status = wait_status(kube, namespace, name, lambda s: (s.get("lastStop") or {}).get("checkpointed"), "stop")
    stop, uid = status["lastStop"], get_job(kube, namespace, name)["metadata"]["uid"]
    assert (stop["reason"], status["phase"]) == ("Suspended", "Suspended"), status
    saved = stop["checkpoint"]
    assert saved["path"].startswith(f"/checkpoints/{uid}/ckpt-"), saved  # this run's own directory
    assert status["lastCheckpoint"]["path"] == saved["path"]

    patch_job(kube, namespace, name, {"spec": {"suspend": False}})
    resumed = f"resuming from {saved['path']} at epoch {saved['epoch'] + 1}"
    wait_until(
        lambda: resumed in log_of(kube, namespace, f"{name}-worker-0"), RUN_TIMEOUT, "the resume from the stop's save"
    )
    delete_job(kube, namespace, name)
