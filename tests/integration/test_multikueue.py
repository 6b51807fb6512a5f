"""MultiKueue across two local clusters: a TrainingJob submitted to the manager cluster (spec.managedBy
kueue.x-k8s.io/multikueue, labelled for a LocalQueue whose ClusterQueue has a MultiKueue AdmissionCheck) runs on
the worker cluster and its status appears on the manager. Both clusters run a real Kueue v0.17.0 and this
checkout's operator; the workers are kwok pods on the worker's fake GPU nodes.

What each side does: on the manager, the operator makes the job's Workload (nothing else: no pods, no status);
Kueue reserves quota for it and MultiKueue copies the Workload to the worker, then the job through its adapter for
custom jobs (spec.managedBy removed, label kueue.x-k8s.io/prebuilt-workload-name naming the copied Workload); on the
worker, the operator runs that copy under the prebuilt Workload once the worker's Kueue admits it, and MultiKueue
copies the copy's status back onto the manager's job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.gang_support import finish
from tests.jobs import create_job, delete_job, get_job, job_manifest, job_pods, live_pods
from tests.kube import Kube, wait_until
from tests.kueue_support import GROUP, VERSION, Queues, holds
from tests.multikueue_support import Worker, delete_secret, grant_kueue_trainingjobs, multikueue_check, worker
from trainingjob.api import constants as k
from trainingjob.queueing.workload import PREBUILT_LABEL, QUEUE_LABEL, workload_name

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]
__all__ = ["worker"]  # the fixture
REACT = 180  # two clusters, each with its own Kueue and operator, on a shared machine


@pytest.fixture
def worker_namespace(worker: Worker, namespace: str) -> Iterator[str]:
    """The test's namespace on the worker too: MultiKueue creates the job in the namespace it has on the manager."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted", "ml.example.com/test": "true"}
    worker.kube.core.create_namespace({"metadata": {"name": namespace, "labels": labels}})
    wait_until(lambda: worker.kube.has_service_account(namespace, "default"), 60, "the worker namespace's account")
    yield namespace
    worker.kube.core.delete_namespace(namespace)


def workloads(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads")["items"]


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return (get_job(kube, namespace, name) or {}).get("status") or {}


@pytest.fixture
def dispatching(kube: Kube, worker: Worker, namespace: str, worker_namespace: str) -> Iterator[Queues]:
    """LocalQueue `team` on both clusters: on the manager into a ClusterQueue whose admissions go through MultiKueue
    to the worker, on the worker into one with quota for the job. The manager's Queues."""
    grant_kueue_trainingjobs(kube)
    grant_kueue_trainingjobs(worker.kube)
    manager_queues, worker_queues = Queues(kube, namespace), Queues(worker.kube, namespace)
    try:
        worker_queues.local_queue("team", worker_queues.cluster_queue("gpus", worker_queues.flavor(), gpus=8))
        check = multikueue_check(manager_queues, worker)
        strategy = {"admissionChecks": [{"name": check}]}
        cluster_queue = manager_queues.cluster_queue(
            "gpus", manager_queues.flavor(), gpus=8, admissionChecksStrategy=strategy
        )
        manager_queues.local_queue("team", cluster_queue)
        yield manager_queues
    finally:
        manager_queues.cleanup()
        worker_queues.cleanup()
        delete_secret(kube, manager_queues.name("worker"))


def submit(kube: Kube, namespace: str, name: str) -> str:
    """A 2-worker job for MultiKueue, running until told (gang_support.finish); the name of its Workload."""
    body = job_manifest(name, workers=2, complete_after=None, gpuPerWorker=2)
    body["spec"]["managedBy"] = k.MULTIKUEUE_CONTROLLER
    body["metadata"]["labels"] = {QUEUE_LABEL: "team"}
    created = create_job(kube, namespace, body)
    return workload_name(name, created["metadata"]["uid"])


def running_on(kube: Kube, namespace: str, name: str, count: int = 2) -> None:
    wait_until(
        lambda: len([p for p in live_pods(kube, namespace, name) if p.status.phase == "Running"]) == count,
        REACT,
        f"{count} running workers of {name}",
    )


def test_a_job_submitted_to_the_manager_runs_on_the_worker_and_its_status_comes_back(
    kube: Kube, worker: Worker, namespace: str, dispatching: Queues
) -> None:
    manager_queues = dispatching
    workload = submit(kube, namespace, "dispatched")

    # On the worker: the copy, under the manager's Workload, running its two workers.
    copy = wait_until(lambda: get_job(worker.kube, namespace, "dispatched"), REACT, "the job on the worker")
    assert copy["metadata"]["labels"][PREBUILT_LABEL] == workload
    assert "managedBy" not in copy["spec"]
    running_on(worker.kube, namespace, "dispatched")
    # The copy runs under the Workload MultiKueue copied there, the manager's: none of the worker's own.
    assert status_of(worker.kube, namespace, "dispatched")["queue"]["workload"] == workload
    assert [w["metadata"]["name"] for w in workloads(worker.kube, namespace)] == [workload]
    # On the manager: the worker's status, copied back; no pods, nothing of the operator's own.
    wait_until(
        lambda: (lambda s: s if s.get("phase") == "Running" else None)(status_of(kube, namespace, "dispatched")),
        REACT,
        "the manager's job to show the worker's Running status",
    )
    assert job_pods(kube, namespace, "dispatched") == []
    manager_job = get_job(kube, namespace, "dispatched") or {}
    assert k.FINALIZER not in (manager_job["metadata"].get("finalizers") or [])

    # The workers finish on the worker: the manager's job Succeeds and its Workload is Finished.
    finish(worker.kube, namespace, "dispatched")
    wait_until(
        lambda: status_of(kube, namespace, "dispatched").get("phase") == "Succeeded",
        REACT,
        "the manager's job to show Succeeded",
    )
    wait_until(lambda: holds(manager_queues.workload(workload), "Finished"), REACT, "the manager's Workload Finished")
    assert job_pods(kube, namespace, "dispatched") == []


def test_a_job_deleted_on_the_manager_is_deleted_on_the_worker_with_its_workers(
    kube: Kube, worker: Worker, namespace: str, dispatching: Queues
) -> None:
    """The manager's job is the one users own: deleting it mid-run takes the worker's copy (MultiKueue deletes it;
    the worker's operator, whose finalizer it carries there, lets it go once its workers are stopped)."""
    workload = submit(kube, namespace, "removed")
    running_on(worker.kube, namespace, "removed")
    delete_job(kube, namespace, "removed")
    wait_until(lambda: get_job(kube, namespace, "removed") is None, REACT, "the manager's job to be gone")
    wait_until(lambda: get_job(worker.kube, namespace, "removed") is None, REACT, "the worker's copy to be gone")
    wait_until(lambda: live_pods(worker.kube, namespace, "removed") == [], REACT, "the worker's pods to be gone")
    wait_until(lambda: dispatching.workload(workload) is None, REACT, "the manager's Workload to be gone")
