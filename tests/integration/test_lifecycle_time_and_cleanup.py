"""Deadlines, startup timeouts, TTL, cleanPodPolicy, Rank0, suspend/resume and checkpoint volumes."""

from __future__ import annotations

import pytest

from tests.jobs import (
    create_job,
    delete_job,
    env_of,
    event_reasons,
    get_job,
    job_manifest,
    job_pods,
    live_pods,
    patch_job,
    wait_phase,
)
from tests.kube import Kube, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def failed_reason(job: dict) -> str:
    return next(c for c in job["status"]["conditions"] if c["type"] == "Failed")["reason"]


def test_active_deadline_fails_a_job_that_runs_too_long(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("slow", workers=2, complete_after=None, activeDeadlineSeconds=3))
    wait_phase(kube, namespace, "slow", "Running")
    assert failed_reason(wait_phase(kube, namespace, "slow", "Failed", timeout=30)) == "DeadlineExceeded"
    wait_until(lambda: not live_pods(kube, namespace, "slow"), 30, "workers removed")


def test_unschedulable_job_says_why_and_times_out(kube: Kube, namespace: str) -> None:
    create_job(
        kube,
        namespace,
        job_manifest("stuck", workers=2, scheduling={"nodeSelector": {"pool": "none"}}, startupTimeoutSeconds=6),
    )
    pending = wait_until(lambda: _message_has(kube, namespace, "stuck", "cannot schedule"), 30, "the reason")
    assert "node(s) didn't match" in pending["status"]["message"]
    assert failed_reason(wait_phase(kube, namespace, "stuck", "Failed", timeout=30)) == "StartupTimeout"


def _message_has(kube: Kube, namespace: str, name: str, text: str) -> dict | None:
    job = get_job(kube, namespace, name) or {}
    return job if text in (job.get("status") or {}).get("message", "") else None


def test_ttl_deletes_the_finished_job_and_its_children(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("brief", complete_after="1s", ttlSecondsAfterFinished=2))
    wait_phase(kube, namespace, "brief", "Succeeded")
    wait_until(lambda: get_job(kube, namespace, "brief") is None, 30, "the TTL to delete the job")
    wait_until(lambda: not job_pods(kube, namespace, "brief"), 60, "its pods to be collected")


@pytest.mark.parametrize(("policy", "left"), [("All", 0), ("Running", 1), ("None", 2)])
def test_clean_pod_policy_on_failure(kube: Kube, namespace: str, policy: str, left: int) -> None:
    create_job(
        kube,
        namespace,
        job_manifest("clean", workers=2, complete_after=None, restartPolicy="Never", cleanPodPolicy=policy),
    )
    wait_phase(kube, namespace, "clean", "Running")
    kube.core.patch_namespaced_pod(
        "clean-worker-0", namespace, {"metadata": {"annotations": {"sim.ml.example.com/fail": "true"}}}
    )
    wait_phase(kube, namespace, "clean", "Failed")
    wait_until(lambda: len(live_pods(kube, namespace, "clean")) == left, 30, f"{left} pods left")


def test_rank0_success_policy(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("chief", workers=3, complete_after=None, successPolicy="Rank0"))
    wait_phase(kube, namespace, "chief", "Running")
    kube.core.patch_namespaced_pod(
        "chief-worker-0", namespace, {"metadata": {"annotations": {"sim.ml.example.com/complete-after": "1s"}}}
    )
    wait_phase(kube, namespace, "chief", "Succeeded")
    wait_until(
        lambda: [p.metadata.name for p in live_pods(kube, namespace, "chief")] == ["chief-worker-0"],
        30,
        "the other workers to be removed",
    )


def test_suspend_and_resume_a_running_job(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("pause", workers=2, complete_after=None))
    wait_phase(kube, namespace, "pause", "Running")
    patch_job(kube, namespace, "pause", {"spec": {"suspend": True}})
    suspended = wait_phase(kube, namespace, "pause", "Suspended")
    assert suspended["status"]["suspendTime"]
    wait_until(lambda: not live_pods(kube, namespace, "pause"), 30, "workers deleted")
    assert kube.core.read_namespaced_service("pause-workers", namespace)
    assert kube.core.read_namespaced_config_map("pause-config", namespace)
    patch_job(kube, namespace, "pause", {"spec": {"suspend": False}})
    resumed = wait_phase(kube, namespace, "pause", "Running")["status"]
    assert (resumed["restartCount"], resumed["disruptionCount"], resumed["attempt"]) == (0, 0, 1)
    assert "suspendTime" not in resumed and "suspendedSeconds" in resumed
    assert {env_of(p)["RESUME_FROM_CHECKPOINT"] for p in live_pods(kube, namespace, "pause")} == {"true"}
    wait_until(
        lambda: {"Suspended", "Resumed", "TrainingResumed"} <= set(event_reasons(kube, namespace, "pause")),
        30,
        "Suspended, Resumed and TrainingResumed events",
    )


def test_job_created_suspended_starts_when_resumed(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("queued", workers=2, complete_after="2s", suspend=True))
    wait_phase(kube, namespace, "queued", "Suspended")
    assert job_pods(kube, namespace, "queued") == []
    patch_job(kube, namespace, "queued", {"spec": {"suspend": False}})
    succeeded = wait_phase(kube, namespace, "queued", "Succeeded")["status"]
    assert succeeded["attempt"] == 0 and "suspendedSeconds" not in succeeded, "queued time is not suspended time"
    wait_until(
        lambda: {"Suspended", "Resumed", "TrainingStarted"} <= set(event_reasons(kube, namespace, "queued")),
        30,
        "Suspended, Resumed and TrainingStarted events",
    )


@pytest.mark.parametrize("delete_on_completion", [False, True])
def test_checkpoint_volume_is_created_mounted_and_kept_or_removed(
    kube: Kube, namespace: str, delete_on_completion: bool
) -> None:
    checkpoint = {
        "enabled": True,
        "dir": "/ckpt",
        "keepLast": 2,
        "deleteOnCompletion": delete_on_completion,
        "storage": {"size": "3Gi", "storageClassName": "standard"},
    }
    create_job(kube, namespace, job_manifest("ckpt", workers=2, complete_after="2s", checkpoint=checkpoint))
    wait_phase(kube, namespace, "ckpt", "Running")
    claim = kube.core.read_namespaced_persistent_volume_claim("ckpt-checkpoints", namespace)
    assert claim.spec.resources.requests["storage"] == "3Gi"
    assert claim.spec.storage_class_name == "standard" and claim.spec.access_modes == ["ReadWriteMany"]
    for pod in live_pods(kube, namespace, "ckpt"):
        mounts = {m.name: m.mount_path for m in pod.spec.containers[0].volume_mounts}
        assert mounts["checkpoints"] == "/ckpt"
        volume = next(v for v in pod.spec.volumes if v.name == "checkpoints")
        assert volume.persistent_volume_claim.claim_name == "ckpt-checkpoints"
        assert env_of(pod)["CHECKPOINT_KEEP_LAST"] == "2"
    wait_phase(kube, namespace, "ckpt", "Succeeded")
    delete_job(kube, namespace, "ckpt")
    wait_until(lambda: get_job(kube, namespace, "ckpt") is None, 30, "the job to be deleted")
    if delete_on_completion:
        wait_until(lambda: live_claims(kube, namespace) == [], 60, "the owned PVC to be collected")
    else:
        assert live_claims(kube, namespace) == ["ckpt-checkpoints"]


def live_claims(kube: Kube, namespace: str) -> list[str]:
    claims = kube.core.list_namespaced_persistent_volume_claim(namespace).items
    return [c.metadata.name for c in claims if c.metadata.deletion_timestamp is None]


def test_existing_claim_is_mounted_for_checkpoints(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "shared-ckpt"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    checkpoint = {"enabled": True, "storage": {"claimName": "shared-ckpt"}}
    create_job(kube, namespace, job_manifest("reuse", complete_after=None, checkpoint=checkpoint))
    wait_phase(kube, namespace, "reuse", "Running")
    pod = live_pods(kube, namespace, "reuse")[0]
    volume = next(v for v in pod.spec.volumes if v.name == "checkpoints")
    assert volume.persistent_volume_claim.claim_name == "shared-ckpt"
    assert {m.name: m.mount_path for m in pod.spec.containers[0].volume_mounts}["checkpoints"] == "/checkpoints"
    names = [c.metadata.name for c in kube.core.list_namespaced_persistent_volume_claim(namespace).items]
    assert names == ["shared-ckpt"]
