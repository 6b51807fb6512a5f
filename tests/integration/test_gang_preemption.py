"""Priority and preemption with the real kube-scheduler and gangs: a high-priority job takes the GPUs of a
low-priority one; the low one restarts as a disruption (not counted against backoffLimit), its whole gang goes at
once, none of its new gang is bound while the room is taken, and it resumes from its checkpoint when room returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.gang_support import REACT, bound, finish, gang_status, gpu_pool, pool_job, wait_gang
from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.jobs import create_job, env_of, get_job, job_pods, live_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator

pytestmark = pytest.mark.integration


def event_messages(kube: Kube, namespace: str, name: str, reason: str) -> list[str]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in events if e.reason == reason]


@pytest.fixture
def priorities(kube: Kube, namespace: str) -> Iterator[tuple[str, str]]:
    scheduling = client.SchedulingV1Api(kube.api)
    names = (f"low-{namespace}", f"high-{namespace}")
    for name, value in zip(names, (100, 100000), strict=True):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    yield names
    for name in names:
        scheduling.delete_priority_class(name)


@pytest.fixture
def six_gpus(kube: Kube, namespace: str) -> Iterator[list[str]]:
    yield from gpu_pool(kube, namespace, nodes=2, gpus=3)


def report_checkpoint(kube: Kube, namespace: str, name: str, operator: RunningOperator, epoch: int) -> None:
    """Worker 0 tells the operator it saved a checkpoint, as trainingjob.sdk does."""
    body = {"epoch": epoch, "totalEpochs": 10, "checkpoint": {"epoch": epoch, "path": f"/checkpoints/ckpt-{epoch}"}}
    token = pod_token(kube, namespace, f"{name}-worker-0")
    status, answer = post(operator, worker_ca(kube, namespace, name), namespace, name, token, json.dumps(body).encode())
    assert status == 202, answer
    wait_until(
        lambda: (
            ((get_job(kube, namespace, name) or {}).get("status") or {}).get("lastCheckpoint", {}).get("epoch") == epoch
        ),
        REACT,
        "the checkpoint to reach status",
    )


def test_a_high_priority_gang_preempts_a_low_one_which_resumes_from_its_checkpoint(
    kube: Kube, namespace: str, operator: RunningOperator, priorities: tuple[str, str], six_gpus: list[str]
) -> None:
    low, high = priorities
    # backoffLimit 0: were preemption counted as a failure, the low job would fail instead of restarting.
    spec = {"backoffLimit": 0, "checkpoint": {"enabled": True, "storage": {"size": "1Gi"}}}
    create_job(kube, namespace, pool_job("low", namespace, scheduling={"priorityClassName": low}, **spec))
    wait_phase(kube, namespace, "low", "Running", timeout=REACT)
    report_checkpoint(kube, namespace, "low", operator, epoch=3)
    first_gang = {p.metadata.uid for p in job_pods(kube, namespace, "low")}

    create_job(kube, namespace, pool_job("high", namespace, scheduling={"priorityClassName": high}))
    wait_phase(kube, namespace, "high", "Running", timeout=2 * REACT)
    assert len(bound(job_pods(kube, namespace, "high"))) == 4

    status = wait_until(
        lambda: (s := get_job(kube, namespace, "low")["status"]).get("disruptionCount") == 1 and s,
        REACT,
        "the preemption to be counted as a disruption",
    )
    assert status.get("restartCount", 0) == 0 and status["phase"] in ("Pending", "Restarting")
    assert any("preempted by the scheduler" in m for m in event_messages(kube, namespace, "low", "Restarting"))
    # The scheduler evicted two of its workers; the operator released the other two with them.
    wait_until(
        lambda: not first_gang & {p.metadata.uid for p in job_pods(kube, namespace, "low")},
        REACT,
        "every worker of the preempted gang to be gone",
    )
    wait_until(lambda: len(live_pods(kube, namespace, "low")) == 4, REACT, "the low job's new gang")
    gang = wait_gang(kube, namespace, "low", "Waiting")
    assert gang["name"] == "low-gang-1"
    for _ in range(10):  # the two free GPUs are not enough: none of the new gang is bound
        assert not bound(live_pods(kube, namespace, "low"))

    finish(kube, namespace, "high")
    wait_phase(kube, namespace, "high", "Succeeded", timeout=REACT)
    job = wait_phase(kube, namespace, "low", "Running", timeout=REACT)
    status = job["status"]
    assert (status["attempt"], status["disruptionCount"], status.get("restartCount", 0)) == (1, 1, 0)
    assert status["lastCheckpoint"]["path"] == "/checkpoints/ckpt-3"
    assert gang_status(kube, namespace, "low")["state"] == "Scheduled"
    run_dir = f"/checkpoints/{job['metadata']['uid']}"  # this run's own directory on the volume
    for pod in live_pods(kube, namespace, "low"):
        env = env_of(pod)
        # the newest checkpoint's path, as seed 002's operator sets it (trainingjob.sdk resumes on it as on true)
        assert env["RESUME_FROM_CHECKPOINT"] == "/checkpoints/ckpt-3" and env["CHECKPOINT_DIR"] == run_dir
        assert pod.spec.priority_class_name == low
        claims = {v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim}
        assert claims == {"low-checkpoints"}  # the volume the first gang wrote its checkpoints to
