"""Restart policies against the real operator: failures and evictions injected through kwok annotations."""

from __future__ import annotations

import pytest

from tests.jobs import SIM, create_job, env_of, event_reasons, get_job, job_manifest, live_pods, wait_phase
from tests.kube import Kube, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
FAST_BACKOFF = {"backoff": {"baseSeconds": 2, "maxSeconds": 4}}


def fail_pod(kube: Kube, namespace: str, pod: str, exit_code: int, reason: str = "Error") -> None:
    kube.core.patch_namespaced_pod(
        pod,
        namespace,
        {
            "metadata": {
                "annotations": {f"{SIM}/fail": "true", f"{SIM}/exit-code": str(exit_code), f"{SIM}/reason": reason}
            }
        },
    )


def running_attempt(kube: Kube, namespace: str, name: str, size: int, attempt: int):
    pods = live_pods(kube, namespace, name)
    ok = (
        len(pods) == size
        and all(p.status.phase == "Running" for p in pods)
        and any(p.metadata.labels["ml.example.com/attempt"] == str(attempt) for p in pods)
    )
    return pods if ok else None


def test_on_failure_restarts_the_gang_after_backoff_then_gives_up(kube: Kube, namespace: str) -> None:
    create_job(
        kube,
        namespace,
        job_manifest("retry", workers=2, complete_after=None, backoffLimit=1, failurePolicy=FAST_BACKOFF),
    )
    wait_phase(kube, namespace, "retry", "Running")
    first_uids = {p.metadata.uid for p in live_pods(kube, namespace, "retry")}
    fail_pod(kube, namespace, "retry-worker-1", 1)
    restarting = wait_phase(kube, namespace, "retry", "Restarting")
    assert restarting["status"]["nextRestartTime"]
    assert restarting["status"]["lastFailure"]["exitCode"] == 1
    pods = wait_until(lambda: running_attempt(kube, namespace, "retry", 2, 1), 60, "the restarted gang")
    assert not first_uids & {p.metadata.uid for p in pods}, "Gang restart replaces every worker"
    assert {(env_of(p)["RESUME_FROM_CHECKPOINT"], env_of(p)["TRAININGJOB_RESTART_COUNT"]) for p in pods} == {
        ("true", "1")
    }
    status = wait_phase(kube, namespace, "retry", "Running")["status"]
    assert (status["restartCount"], status["attempt"]) == (1, 1)
    assert "nextRestartTime" not in status

    fail_pod(kube, namespace, "retry-worker-0", 1)
    failed = wait_phase(kube, namespace, "retry", "Failed")
    condition = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "BackoffLimitExceeded"
    wait_until(
        lambda: not [p for p in live_pods(kube, namespace, "retry") if p.status.phase == "Running"],
        30,
        "running workers cleaned up (cleanPodPolicy Running)",
    )
    wait_until(
        lambda: {"Restarting", "BackoffLimitExceeded"} <= set(event_reasons(kube, namespace, "retry")),
        30,
        "Restarting and BackoffLimitExceeded events",
    )
    # One WorkerFailed per failure, naming the worker, exit code and reason; not one per reconcile.
    assert sorted(worker_failed_messages(kube, namespace, "retry")) == [
        "worker 0 (pod retry-worker-0) failed with exit code 1 (Error)",
        "worker 1 (pod retry-worker-1) failed with exit code 1 (Error)",
    ]


def worker_failed_messages(kube: Kube, namespace: str, name: str) -> list[str]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in events if e.reason == "WorkerFailed" and e.type == "Warning"]


def test_exit_code_policy_fails_permanent_codes_at_once(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("perm", workers=2, complete_after=None, restartPolicy="ExitCode"))
    wait_phase(kube, namespace, "perm", "Running")
    fail_pod(kube, namespace, "perm-worker-0", 2)
    failed = wait_phase(kube, namespace, "perm", "Failed")
    assert failed["status"]["restartCount"] == 0
    assert next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")["reason"] == "PermanentExitCode"


def test_exit_code_policy_retries_signals(kube: Kube, namespace: str) -> None:
    create_job(
        kube,
        namespace,
        job_manifest("oom", workers=2, complete_after=None, restartPolicy="ExitCode", failurePolicy=FAST_BACKOFF),
    )
    wait_phase(kube, namespace, "oom", "Running")
    fail_pod(kube, namespace, "oom-worker-1", 137, "OOMKilled")
    wait_until(lambda: running_attempt(kube, namespace, "oom", 2, 1), 60, "the restarted gang")
    status = get_job(kube, namespace, "oom")["status"]
    assert status["restartCount"] == 1 and status["lastFailure"]["reason"] == "OOMKilled"


def test_eviction_is_retried_without_counting_as_a_failure(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("evict", workers=2, complete_after=None, backoffLimit=0))
    wait_phase(kube, namespace, "evict", "Running")
    kube.core.patch_namespaced_pod("evict-worker-0", namespace, {"metadata": {"annotations": {f"{SIM}/evict": "true"}}})
    wait_until(lambda: running_attempt(kube, namespace, "evict", 2, 1), 60, "the gang to come back")
    status = wait_phase(kube, namespace, "evict", "Running")["status"]
    assert (status["restartCount"], status["disruptionCount"]) == (0, 1)


def test_worker_strategy_replaces_only_the_failed_pod(kube: Kube, namespace: str) -> None:
    create_job(
        kube,
        namespace,
        job_manifest(
            "solo", workers=3, complete_after=None, failurePolicy={"restartStrategy": "Worker", **FAST_BACKOFF}
        ),
    )
    wait_phase(kube, namespace, "solo", "Running")
    before = {p.metadata.name: p.metadata.uid for p in live_pods(kube, namespace, "solo")}
    fail_pod(kube, namespace, "solo-worker-1", 1)
    pods = wait_until(lambda: running_attempt(kube, namespace, "solo", 3, 1), 60, "worker 1 replaced")
    after = {p.metadata.name: p.metadata.uid for p in pods}
    assert after["solo-worker-0"] == before["solo-worker-0"] and after["solo-worker-2"] == before["solo-worker-2"]
    assert after["solo-worker-1"] != before["solo-worker-1"]
    assert get_job(kube, namespace, "solo")["status"]["restartCount"] == 1


def test_failure_rule_can_ignore_a_worker(kube: Kube, namespace: str) -> None:
    rules = [{"exitCodes": [42], "action": "Ignore"}]
    create_job(
        kube,
        namespace,
        job_manifest("lenient", workers=2, complete_after="4s", restartPolicy="Never", failurePolicy={"rules": rules}),
    )
    wait_phase(kube, namespace, "lenient", "Running")
    fail_pod(kube, namespace, "lenient-worker-1", 42)
    wait_phase(kube, namespace, "lenient", "Succeeded")
