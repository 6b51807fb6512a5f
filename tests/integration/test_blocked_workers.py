"""Workers that cannot start or be created are explained at once, and a gang admission refuses gives back what it
holds: kubelet waiting reasons (kwok's tj-pod-waiting stage), a ValidatingAdmissionPolicy refusing one worker and a
missing PriorityClass (real admission plugins of the API server), a checkpoint PVC that cannot bind. Quotas, which
the operator checks before it creates a gang, are tested in test_gang_quotas.py.

Each case checks all four places a user may look: status.message, workerStatuses, condition Blocked and a
Warning Event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration import api_support
from tests.jobs import SIM, create_job, get_job, job_manifest, job_pods, live_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import STUCK_AFTER_SECONDS
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
# Bounds for an operator on a loaded 2-core machine: it reacts within a second or two when idle.
REACT = 60


def blocked(job: dict[str, Any] | None) -> dict[str, Any] | None:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Blocked" and c["status"] == "True"), None)


def wait_blocked(kube: Kube, namespace: str, name: str, reason: str, timeout: float = REACT) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        job = get_job(kube, namespace, name)
        condition = blocked(job)
        return job if condition and condition["reason"] == reason else None

    return wait_until(reached, timeout, f"{name} to be Blocked ({reason})")


def warnings(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return {e.reason: e.message for e in events if e.involved_object.kind == k.KIND and e.type == "Warning"}


@pytest.mark.parametrize(
    ("reason", "message", "condition_reason"),
    [
        ("ErrImagePull", 'failed to pull image "registry.example/trian:1": not found', "ImagePullBackOff"),
        ("InvalidImageName", 'couldn\'t parse image name "Registry/UPPER"', "InvalidImageName"),
        (
            "CreateContainerConfigError",
            "container has runAsNonRoot and image will run as root (pod: w, container: trainer)",
            "CreateContainerConfigError",
        ),
    ],
)
def test_a_worker_that_cannot_start_says_why_everywhere(
    kube: Kube, namespace: str, reason: str, message: str, condition_reason: str
) -> None:
    annotations = {f"{SIM}/waiting-reason": reason, f"{SIM}/waiting-message": message}
    create_job(kube, namespace, job_manifest("waits", workers=2, complete_after=None, podAnnotations=annotations))
    job = wait_blocked(kube, namespace, "waits", condition_reason)
    status = job["status"]
    assert status["phase"] == "Pending"
    assert message in blocked(job)["message"] and blocked(job)["message"] in status["message"]

    def every_worker_says_why() -> bool:
        workers = get_job(kube, namespace, "waits")["status"].get("workerStatuses") or []
        return len(workers) == 2 and {(w.get("reason"), w.get("message")) for w in workers} == {(reason, message)}

    wait_until(every_worker_says_why, REACT, "workerStatuses to give each worker's reason")
    wait_until(lambda: condition_reason in warnings(kube, namespace, "waits"), REACT, "a Warning Event")
    if reason == "CreateContainerConfigError":
        assert "spec.securityContext.runAsUser" in blocked(job)["message"]


def test_a_fixed_worker_starts_and_the_job_is_no_longer_blocked(kube: Kube, namespace: str) -> None:
    annotations = {f"{SIM}/waiting-reason": "ImagePullBackOff"}
    create_job(kube, namespace, job_manifest("fixed", workers=2, complete_after=None, podAnnotations=annotations))
    wait_blocked(kube, namespace, "fixed", "ImagePullBackOff")
    for pod in job_pods(kube, namespace, "fixed"):  # the image appears in the registry: the kubelet starts it
        kube.core.patch_namespaced_pod(
            pod.metadata.name, namespace, {"metadata": {"annotations": {f"{SIM}/waiting-reason": None}}}
        )
    job = wait_phase(kube, namespace, "fixed", "Running", timeout=REACT)
    condition = next(c for c in job["status"]["conditions"] if c["type"] == "Blocked")
    assert condition["status"] == "False"


def _refused(kube: Kube, namespace: str, pod: dict[str, Any], policy: str) -> bool:
    try:
        kube.core.create_namespaced_pod(namespace, pod, dry_run="All")
    except ApiException as error:
        if error.status == 403 and policy in str(error.body):
            return True
        raise
    return False


def refuse_worker(kube: Kube, namespace: str, index: int) -> Callable[[], None]:
    """A ValidatingAdmissionPolicy (a policy admission plugin, as a webhook would be) that refuses to create worker
    `index` in `namespace` with 403; returns what lifts it."""
    name = f"refuse-worker-{index}-{namespace}"
    admission = client.AdmissionregistrationV1Api(kube.api)
    label = f"object.metadata.labels[{k.LABEL_WORKER_INDEX!r}]"
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                    ],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                },
                "validations": [
                    {
                        "expression": f"!has(object.metadata.labels) || {label} != '{index}'",
                        "message": f"worker {index} is refused by policy {name}",
                        "reason": "Forbidden",
                    }
                ],
            },
        }
    )
    binding = {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    admission.create_validating_admission_policy_binding(binding)
    # The API server enforces a new policy once its policy cache has it: a dry-run create tells when.
    probe = {
        "metadata": {"generateName": "probe-", "labels": {k.LABEL_WORKER_INDEX: str(index)}},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": "probe",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }
    wait_until(lambda: _refused(kube, namespace, probe, name), REACT, f"policy {name} to be enforced")

    def lift() -> None:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)

    return lift


def test_a_gang_admission_refuses_in_part_gives_back_what_it_got_and_retries(kube: Kube, namespace: str) -> None:
    lift = refuse_worker(kube, namespace, 2)
    try:
        backoff = {"backoff": {"baseSeconds": 2, "maxSeconds": 4}}
        manifest = job_manifest("big", workers=3, complete_after=None, gpuPerWorker=1, failurePolicy=backoff)
        create_job(kube, namespace, manifest)
        job = wait_blocked(kube, namespace, "big", "AdmissionDenied")
        assert "worker 2 is refused by policy" in blocked(job)["message"]
        assert "refused by policy" in job["status"]["message"] and job["status"].get("nextRestartTime")
        refused = [w for w in job["status"]["workerStatuses"] if w["phase"] == "NotCreated"]
        assert [(w["workerId"], w["reason"]) for w in refused] == [(2, "AdmissionDenied")]
        wait_until(lambda: "AdmissionDenied" in warnings(kube, namespace, "big"), REACT, "a Warning Event")
        # What was created goes back: no pod of the gang keeps its GPU while the last one cannot be created.
        # (Between retries a worker may exist for a moment, so look for a moment with none.)
        wait_until(lambda: not live_pods(kube, namespace, "big"), REACT, "the partial gang to be released")
        assert get_job(kube, namespace, "big")["status"]["phase"] == "Pending"
    finally:
        lift()
    job = wait_phase(kube, namespace, "big", "Running", timeout=REACT)
    assert job["status"].get("restartCount", 0) == 0 and job["status"].get("disruptionCount", 0) == 0
    assert len(live_pods(kube, namespace, "big")) == 3


def test_a_missing_priority_class_is_explained(kube: Kube, namespace: str) -> None:
    # The validating webhook refuses a job naming a PriorityClass that does not exist; one deleted after the job was
    # admitted (or a job admitted while the webhook was down) reaches the operator, and pod creation is refused.
    priority_class = f"gone-{namespace}"
    api_support.ensure_priority_class(kube, priority_class)
    scheduling = {"priorityClassName": priority_class}
    create_job(kube, namespace, job_manifest("prio", complete_after=None, suspend=True, scheduling=scheduling))
    client.SchedulingV1Api(kube.api).delete_priority_class(priority_class)
    patch_job(kube, namespace, "prio", {"spec": {"suspend": False}})
    job = wait_blocked(kube, namespace, "prio", "AdmissionDenied")
    assert f"no PriorityClass with name {priority_class}" in blocked(job)["message"]
    [worker] = job["status"]["workerStatuses"]
    assert (worker["podName"], worker["phase"], worker["reason"]) == ("prio-worker-0", "NotCreated", "AdmissionDenied")
    assert not job_pods(kube, namespace, "prio")
    patch_job(kube, namespace, "prio", {"spec": {"scheduling": {"priorityClassName": None}}})
    wait_phase(kube, namespace, "prio", "Running", timeout=REACT)


def test_a_checkpoint_pvc_that_cannot_bind_is_explained(kube: Kube, namespace: str) -> None:
    storage = {"size": "1Gi", "storageClassName": "no-such-class"}
    manifest = job_manifest("ckpt", complete_after=None, checkpoint={"enabled": True, "storage": storage})
    create_job(kube, namespace, manifest)
    job = wait_blocked(kube, namespace, "ckpt", "CheckpointVolumePending", timeout=REACT + STUCK_AFTER_SECONDS)
    message = blocked(job)["message"]
    assert "checkpoint PVC ckpt-checkpoints is still Pending" in message
    assert "ReadWriteMany from StorageClass no-such-class" in message
    wait_until(lambda: "CheckpointVolumePending" in warnings(kube, namespace, "ckpt"), REACT, "a Warning Event")


def test_a_worker_name_held_by_a_relabelled_pod_is_explained_until_it_is_gone(kube: Kube, namespace: str) -> None:
    # Relabelling a pod out of its controller is how one quarantines it for debugging: a ReplicaSet then creates a
    # pod under a new name, but a worker's name is fixed, and the relabelled pod, no longer watched, keeps it.
    backoff = {"backoff": {"baseSeconds": 2, "maxSeconds": 4}}
    create_job(kube, namespace, job_manifest("held", workers=2, complete_after=None, failurePolicy=backoff))
    wait_phase(kube, namespace, "held", "Running", timeout=REACT)
    kube.core.patch_namespaced_pod("held-worker-0", namespace, {"metadata": {"labels": {k.LABEL_JOB_NAME: "debug"}}})
    job = wait_blocked(kube, namespace, "held", "PodNameTaken")
    message = blocked(job)["message"]
    assert message.startswith("worker 0 (pod held-worker-0) cannot be created: a pod of that name is not this job's")
    assert f"its label {k.LABEL_JOB_NAME} is 'debug'" in message and message in job["status"]["message"]
    assert f"kubectl delete pod held-worker-0 -n {namespace}" in message
    wait_until(lambda: "PodNameTaken" in warnings(kube, namespace, "held"), REACT, "a Warning Event")
    kube.core.delete_namespaced_pod("held-worker-0", namespace, grace_period_seconds=0)  # its deletion: no event
    job = wait_phase(kube, namespace, "held", "Running", timeout=REACT)
    assert blocked(job) is None
    workers = {p.metadata.name: p.metadata.labels[k.LABEL_JOB_NAME] for p in live_pods(kube, namespace, "held")}
    assert workers == {"held-worker-0": "held", "held-worker-1": "held"}
