"""Namespace quotas as a team sharing a namespace expects (the multi-tenancy example of docs/trainingjob.md): a
ResourceQuota on `count/trainingjobs.ml.example.com` refuses the job beyond it at submission, and one on
`requests.nvidia.com/gpu` lets a gang in only whole: a gang that does not fit creates no pod (so holds no quota
another job needs), says which quota lacks what, and starts once the room is there.
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from tests.integration.test_blocked_workers import REACT, blocked, wait_blocked, warnings
from tests.jobs import create_job, get_job, job_manifest, job_pods, live_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
GPU_QUOTA = f"requests.{k.GPU_RESOURCE}"


def quota(kube: Kube, namespace: str, name: str, hard: dict[str, str]) -> None:
    """A ResourceQuota (created, or its limits replaced), once the quota controller has accounted for it."""
    try:
        kube.core.create_namespaced_resource_quota(namespace, {"metadata": {"name": name}, "spec": {"hard": hard}})
    except ApiException as error:
        if error.status != 409:
            raise
        kube.core.patch_namespaced_resource_quota(name, namespace, {"spec": {"hard": hard}})

    def accounted() -> bool:
        # status.used lacks a resource until the quota controller monitors it (a CRD's count is found by its periodic
        # discovery): until then the API server refuses every create it covers with "status unknown for quota".
        status = kube.core.read_namespaced_resource_quota(name, namespace).status
        return (status.hard or {}) == hard and set(hard) <= set(status.used or {})

    wait_until(accounted, REACT + 60, f"the quota controller to account for quota {name}")


def used(kube: Kube, namespace: str, name: str, resource: str) -> str:
    return (kube.core.read_namespaced_resource_quota(name, namespace).status.used or {}).get(resource, "0")


def test_a_job_count_quota_refuses_the_job_beyond_it(kube: Kube, namespace: str) -> None:
    resource = f"count/{k.PLURAL}.{k.GROUP}"
    quota(kube, namespace, "jobs", {resource: "2"})
    for name in ("one", "two"):
        create_job(kube, namespace, job_manifest(name, complete_after=None))
    wait_until(lambda: used(kube, namespace, "jobs", resource) == "2", REACT, "the quota to count 2 jobs")
    with pytest.raises(ApiException) as refused:
        create_job(kube, namespace, job_manifest("three", complete_after=None))
    assert refused.value.status == 403
    assert f"exceeded quota: jobs, requested: {resource}=1, used: {resource}=2, limited: {resource}=2" in str(
        refused.value.body
    )
    assert get_job(kube, namespace, "three") is None
    kube.custom.delete_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, "one")
    wait_until(lambda: used(kube, namespace, "jobs", resource) == "1", REACT, "the quota to count the deletion")
    create_job(kube, namespace, job_manifest("three", complete_after=None))
    wait_phase(kube, namespace, "three", "Running", timeout=REACT)


def test_a_gpu_quota_admits_gangs_whole_and_holds_the_next_without_a_pod(kube: Kube, namespace: str) -> None:
    quota(kube, namespace, "gpus", {GPU_QUOTA: "6"})
    create_job(kube, namespace, job_manifest("first", workers=4, complete_after=None, gpuPerWorker=1))
    wait_phase(kube, namespace, "first", "Running", timeout=REACT)
    create_job(kube, namespace, job_manifest("second", workers=4, complete_after="2s", gpuPerWorker=1))
    job = wait_blocked(kube, namespace, "second", "QuotaExceeded")
    message = blocked(job)["message"]
    assert f"ResourceQuota gpus: 2 of 6 {GPU_QUOTA} free now and the gang needs 4" in message
    assert job["status"]["phase"] == "Pending" and job["status"]["gang"]["reason"] == "QuotaExceeded"
    wait_until(lambda: "QuotaExceeded" in warnings(kube, namespace, "second"), REACT, "a Warning Event")
    # Not one pod, so not one GPU of quota held: the first job's share stays whole, nothing is refused.
    for _ in range(10):
        assert not job_pods(kube, namespace, "second") and used(kube, namespace, "gpus", GPU_QUOTA) == "4"
    assert "AdmissionDenied" not in warnings(kube, namespace, "second")
    kube.custom.delete_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, "first")
    job = wait_phase(kube, namespace, "second", "Succeeded", timeout=2 * REACT)
    assert job["status"].get("restartCount", 0) == 0 and job["status"]["attempt"] == 0


def test_a_gang_its_quota_shrank_under_waits_and_says_so(kube: Kube, namespace: str) -> None:
    # The validating webhook refuses a job its quota could never hold; a quota lowered after the job was admitted
    # reaches the operator, which creates nothing until an administrator makes room again.
    quota(kube, namespace, "gpus", {GPU_QUOTA: "8"})
    create_job(kube, namespace, job_manifest("huge", workers=4, complete_after=None, gpuPerWorker=2, suspend=True))
    quota(kube, namespace, "gpus", {GPU_QUOTA: "6"})
    patch_job(kube, namespace, "huge", {"spec": {"suspend": False}})
    job = wait_blocked(kube, namespace, "huge", "QuotaExceeded")
    message = blocked(job)["message"]
    assert f"ResourceQuota gpus allows {GPU_QUOTA} 6 in this namespace, and the gang of 4 workers needs 8" in message
    assert not job_pods(kube, namespace, "huge")
    quota(kube, namespace, "gpus", {GPU_QUOTA: "8"})
    wait_phase(kube, namespace, "huge", "Running", timeout=REACT)
    assert len(live_pods(kube, namespace, "huge")) == 4
