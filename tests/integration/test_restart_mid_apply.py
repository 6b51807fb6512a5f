"""The operator restarting mid-apply loses nothing. While jobs are applied in both versions (v1alpha1 needs the
conversion webhook to be stored; a v1 job without an image needs the mutating webhook), the operator, and so every
webhook, is killed and started again. Each create either fails in words and succeeds when retried, or stores the
job whole; then every job runs to the end with exactly its own pods, none twice."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.integration.v1_support import V1, create, read, v1_job
from tests.jobs import job_manifest, job_pods, phase_of
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator, start_operator
from trainingjob.api import constants as c

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
JOBS = 12


def manifests() -> list[dict[str, Any]]:
    result = []
    for index in range(JOBS):
        if index % 2:
            result.append(v1_job(f"guide-{index}", numWorkers=2, complete_after="3s"))
        else:
            result.append(job_manifest(f"lab-{index}", workers=2, complete_after="3s", hyperparameters={"i": index}))
    return result


class Applier(threading.Thread):
    """Applies each manifest until it is stored, as kubectl in a retry loop (or a GitOps tool) would."""

    def __init__(self, kube: Kube, namespace: str, documents: list[dict[str, Any]]) -> None:
        super().__init__(daemon=True)
        self.kube, self.namespace, self.documents = kube, namespace, documents
        self.failures: list[str] = []
        self.stored = 0

    def run(self) -> None:
        for document in self.documents:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    create(self.kube, self.namespace, document)
                    break
                except ApiException as error:
                    if error.status == 409:  # an earlier attempt was stored after all: the same object
                        break
                    self.failures.append(f"{error.status}: {error.body}")
                    time.sleep(0.5)
            self.stored += 1
            time.sleep(0.3)


def test_jobs_applied_while_the_operator_restarts_are_all_stored_whole_and_run_once(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    documents = manifests()
    applier = Applier(kube, namespace, documents)
    applier.start()
    wait_until(lambda: applier.stored >= 3, 60, "the first jobs to be stored")
    operator.stop(hard=True)
    time.sleep(1)  # creates keep coming while nothing serves the webhooks
    restarted = start_operator(
        operator.kubeconfig, operator.log_path, progress_port=operator.progress_port, webhook_port=operator.webhook_port
    )
    operator.process, operator.metrics_port = restarted.process, restarted.metrics_port
    applier.join(timeout=240)
    assert not applier.is_alive() and applier.stored == JOBS
    assert applier.failures, "no create met the restart: nothing was tested"
    for failure in applier.failures:  # every failure said what was missing
        assert "webhook" in failure or "spec.image is required" in failure, failure
    for document in documents:
        name = document["metadata"]["name"]
        version = document["apiVersion"].rpartition("/")[2]
        stored = read(kube, namespace, name, version)
        sent = {key: value for key, value in document["spec"].items() if key != "image"}
        assert {key: stored["spec"][key] for key in sent} == sent, f"{name} was stored whole"
        if document["apiVersion"] == V1:
            assert stored["spec"]["image"] == "training-image:resnet50"
    wait_until(
        lambda: all(
            phase_of(read(kube, namespace, d["metadata"]["name"], c.V1ALPHA1)) == "Succeeded" for d in documents
        ),
        240,
        "every job to succeed",
        interval=1,
    )
    for document in documents:
        name = document["metadata"]["name"]
        pods = job_pods(kube, namespace, name)
        assert [p.metadata.name for p in pods] == [f"{name}-worker-0", f"{name}-worker-1"]
        assert {p.metadata.labels[c.LABEL_ATTEMPT] for p in pods} == {"0"}, f"{name} was not restarted"
