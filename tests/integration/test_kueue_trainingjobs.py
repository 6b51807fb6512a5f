"""TrainingJobs as workloads of a real Kueue (v0.17.0, cluster/kueue/): jobs labelled for a LocalQueue wait
(phase Queued, with Kueue's own reason) until Kueue admits their Workload into a ClusterQueue's quota, go by
priority, and run on the admitted flavor's nodes. The workers run on kwok's fake GPU nodes and finish when told.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ClusterUnderTest
from tests.gang_support import finish
from tests.jobs import create_job, get_job, job_manifest, job_pods, live_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.kueue_support import Queues, pending_workloads
from tests.metrics import scrape, value
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k
from trainingjob.queueing.workload import PRIORITY_LABEL, QUEUE_LABEL

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]
REACT = 90
API_REQUESTS = "trainingjob_api_requests_total"


def queued_job(name: str, queue: str, priority: str | None = None, workers: int = 2, gpus: int = 4) -> dict[str, Any]:
    """`workers` x `gpus` GPUs on kwok's nodes, running until told to finish (gang_support.finish)."""
    body = job_manifest(name, workers=workers, complete_after=None, gpuPerWorker=gpus)
    body["metadata"]["labels"] = {QUEUE_LABEL: queue, **({PRIORITY_LABEL: priority} if priority else {})}
    return body


def queue_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return status_of(kube, namespace, name).get("queue") or {}


def events_of(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.reason, e.message) for e in events]


def wait_message(kube: Kube, namespace: str, name: str, text: str) -> dict[str, Any]:
    """The job's status once its message carries `text` (Kueue's reason arrives after the job is Queued)."""
    return wait_until(
        lambda: (lambda s: s if text in str(s.get("message")) else None)(status_of(kube, namespace, name)),
        REACT,
        f"{namespace}/{name}'s message to say {text!r}",
    )


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return (get_job(kube, namespace, name) or {}).get("status") or {}


def test_two_local_queues_share_8_gpus_and_the_waiting_jobs_go_by_priority(
    kube: Kube, namespace: str, queues: Queues, cluster: ClusterUnderTest
) -> None:
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(node_labels={"accelerator": "nvidia-gpu"}), gpus=8)
    queues.local_queue("team-a", cluster_queue)
    queues.local_queue("team-b", cluster_queue)
    low, high = queues.priority_class("low", 100), queues.priority_class("high", 1000)

    create_job(kube, namespace, queued_job("first", "team-a"))
    running = wait_phase(kube, namespace, "first", "Running", timeout=REACT)
    assert running["status"]["queue"]["admitted"] and running["status"]["queue"]["clusterQueue"] == cluster_queue
    assert all(p.spec.node_selector["accelerator"] == "nvidia-gpu" for p in live_pods(kube, namespace, "first"))

    create_job(kube, namespace, queued_job("low", "team-b", low))
    create_job(kube, namespace, queued_job("high", "team-a", high))
    for name in ("low", "high"):
        wait_phase(kube, namespace, name, "Queued", timeout=REACT)
        wait_message(kube, namespace, name, "insufficient unused quota for nvidia.com/gpu")
        assert not live_pods(kube, namespace, name)
    waiting = wait_until(
        lambda: (
            {p["metadata"]["name"]: p for q in ("team-a", "team-b") for p in pending_workloads(cluster, namespace, q)}
            if len(pending_workloads(cluster, namespace, "team-a"))
            + len(pending_workloads(cluster, namespace, "team-b"))
            == 2
            else None
        ),
        REACT,
        "both jobs in Kueue's pending list",
    )
    order = sorted(waiting.values(), key=lambda p: p["positionInClusterQueue"])
    assert [p["metadata"]["name"] for p in order] == [
        queue_status(kube, namespace, n)["workload"] for n in ("high", "low")
    ]

    finish(kube, namespace, "first")
    wait_phase(kube, namespace, "first", "Succeeded", timeout=REACT)
    wait_phase(kube, namespace, "high", "Running", timeout=REACT)
    assert (get_job(kube, namespace, "low") or {})["status"]["phase"] == "Queued"  # the high one went first

    finish(kube, namespace, "high")
    admitted = wait_phase(kube, namespace, "low", "Running", timeout=REACT)["status"]["queue"]
    assert admitted["queuedSeconds"] > 0 and admitted["admitted"] and "queuedSince" not in admitted
    reasons = [reason for reason, _ in events_of(kube, namespace, "low")]
    assert "Queued" in reasons and "Admitted" in reasons


def test_a_preempted_job_stops_returns_to_the_queue_and_runs_again_and_its_workload_goes_with_it(
    kube: Kube, namespace: str, queues: Queues
) -> None:
    preempting = {"preemption": {"withinClusterQueue": "LowerPriority"}}
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(), gpus=8, **preempting)
    queues.local_queue("team", cluster_queue)
    low, high = queues.priority_class("low", 100), queues.priority_class("high", 1000)

    create_job(kube, namespace, queued_job("low", "team", low))
    wait_phase(kube, namespace, "low", "Running", timeout=REACT)
    workload = queue_status(kube, namespace, "low")["workload"]
    owner = (queues.workload(workload) or {})["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainingJob", "low", True)

    create_job(kube, namespace, queued_job("high", "team", high))
    preempted = wait_phase(kube, namespace, "low", "Queued", timeout=REACT)["status"]
    assert preempted["queue"]["reason"] == "Preempted", preempted["queue"]
    wait_until(lambda: not job_pods(kube, namespace, "low"), REACT, "the preempted job's workers to be gone")
    wait_phase(kube, namespace, "high", "Running", timeout=REACT)
    assert "Preempted" in [reason for reason, _ in events_of(kube, namespace, "low")]

    finish(kube, namespace, "high")
    again = wait_phase(kube, namespace, "low", "Running", timeout=REACT)["status"]
    assert (again["disruptionCount"], again.get("restartCount", 0), again["attempt"]) == (1, 0, 1), again
    assert again["queue"]["admitted"] and queues.workload(workload) is not None

    kube.custom.delete_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, "low")
    wait_until(lambda: queues.workload(workload) is None, REACT, "the deleted job's Workload to be gone")


def test_an_elastic_job_larger_than_its_quota_is_admitted_partially_and_runs_with_the_workers_admitted(
    kube: Kube, namespace: str, queues: Queues
) -> None:
    """4 workers x 2 GPUs asked, 6 GPUs in the ClusterQueue, elastic.minWorkers 2: Kueue's partial admission admits
    3 (the Workload's minCount is minWorkers), and the operator creates those 3 and no fourth."""
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(), gpus=6)
    queues.local_queue("team", cluster_queue)
    body = queued_job("elastic", "team", workers=4, gpus=2)
    body["spec"]["elastic"] = {"minWorkers": 2, "maxWorkers": 4}
    create_job(kube, namespace, body)

    queue = wait_phase(kube, namespace, "elastic", "Running", timeout=REACT)["status"]["queue"]
    assert queue["admitted"] and queue["admittedWorkers"] == 3, queue
    assert "3 of the 4 workers asked" in queue["message"] and "minWorkers is 2" in queue["message"], queue
    workload = queues.workload(queue["workload"]) or {}
    assert [(s["count"], s.get("minCount")) for s in workload["spec"]["podSets"]] == [(4, 2)]
    assert [a["count"] for a in workload["status"]["admission"]["podSetAssignments"]] == [3]
    wait_until(lambda: len(live_pods(kube, namespace, "elastic")) == 3, REACT, "the 3 admitted workers")
    names = sorted(p.metadata.name for p in job_pods(kube, namespace, "elastic"))
    assert names == [f"elastic-worker-{i}" for i in range(3)]
    admitted = [message for reason, message in events_of(kube, namespace, "elastic") if reason == "Admitted"]
    assert admitted and "3 of the 4 workers" in admitted[-1]


CHILDREN = ("services", "configmaps", "endpointslices", "workloads")


def test_jobs_admitted_together_get_each_child_created_once(
    kube: Kube, namespace: str, queues: Queues, kueue_operator: RunningOperator
) -> None:
    """A Workload's admission plans its job again moments after the job's Service, ConfigMap and Workload were
    created, and a plan from an informer that did not show them yet created them again, answered AlreadyExists
    (the bench's 16 jobs: 28 ConfigMap creates, 12 of them refused). What was written now stands in for the
    cached view until the cache shows it (runtime/store.py Index.stand_in): no create of ours meets a 409."""
    jobs = 16
    queues.local_queue("team", queues.cluster_queue("gpus", queues.flavor(), gpus=jobs))
    before = scrape(kueue_operator)
    for index in range(jobs):
        create_job(kube, namespace, queued_job(f"j{index}", "team", workers=1, gpus=1))
    for index in range(jobs):
        wait_phase(kube, namespace, f"j{index}", "Running", timeout=REACT)
    after = scrape(kueue_operator)

    def creates(code: str) -> dict[str, float]:
        return {
            resource: value(after, API_REQUESTS, verb="create", resource=resource, code=code)
            - value(before, API_REQUESTS, verb="create", resource=resource, code=code)
            for resource in CHILDREN
        }

    print(f"creates of {jobs} jobs' children: {creates('201')}, AlreadyExists: {creates('409')}")
    assert creates("409") == dict.fromkeys(CHILDREN, 0)
    assert all(creates("201")[resource] >= jobs for resource in ("services", "configmaps", "workloads"))
