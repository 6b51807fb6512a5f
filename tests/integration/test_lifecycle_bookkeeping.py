"""The operator's bookkeeping of its own writes, against the real API server.

The reconciler skips job bodies it has written over until the watch shows its write; these tests pin down what the
API server does with a status patch that changes nothing, and that such a patch never leaves a job unattended.
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from tests.jobs import create_job, get_job, job_manifest, live_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def patch_status(kube: Kube, namespace: str, name: str, resource_version: str) -> dict:
    """What the operator sends when a plan deletes pods but leaves the status as it is (a JSON merge patch)."""
    patch = {"metadata": {"resourceVersion": resource_version}, "status": {}}
    return kube.custom.patch_namespaced_custom_object_status(k.GROUP, k.VERSION, namespace, k.PLURAL, name, patch)


def test_an_empty_status_patch_is_checked_but_changes_no_resource_version(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("quiet", complete_after=None, suspend=True))
    old = wait_phase(kube, namespace, "quiet", "Suspended")["metadata"]["resourceVersion"]
    current = patch_job(kube, namespace, "quiet", {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(ApiException) as refused:
        patch_status(kube, namespace, "quiet", old)
    assert refused.value.status == 409, "the precondition guards the pod deletes that follow"
    version = current["metadata"]["resourceVersion"]
    assert patch_status(kube, namespace, "quiet", version)["metadata"]["resourceVersion"] == version


def test_stray_workers_of_a_suspended_job_are_deleted_every_time(kube: Kube, namespace: str) -> None:
    """Deleting a pod leaves the status as it was; the operator used to wait for an event of that write forever."""
    create_job(kube, namespace, job_manifest("idle", workers=2, complete_after=None, suspend=True))
    job = TrainingJob.from_body(wait_phase(kube, namespace, "idle", "Suspended"))
    for index in (0, 1):
        kube.core.create_namespaced_pod(namespace, desired_worker_pod(job, index, 0, OperatorConfig()))
        wait_until(lambda: not live_pods(kube, namespace, "idle"), 30, f"stray worker {index} to be deleted")
    assert get_job(kube, namespace, "idle")["status"]["phase"] == "Suspended"
