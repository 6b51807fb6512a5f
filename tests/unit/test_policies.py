"""Restart, backoff, deadline and suspension decisions: pure functions and planner runs over event sequences."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_planner import CONFIG, NOW, children, kinds, make_job, pod, stored
from trainingjob.api.times import format_time
from trainingjob.api.types import JobSpec
from trainingjob.planning.actions import CreateChild, DeleteChild, DeleteJob
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.policies import backoff_seconds, decide_failure


def spec(**fields: Any) -> JobSpec:
    return JobSpec.from_dict({"framework": "pytorch", "image": "i", "command": ["c"], **fields})


def failed_pod(code: int | None) -> PodView:
    return PodView(name="w", index=0, attempt=0, spec_hash="h", phase="Failed", exit_code=code)


@pytest.mark.parametrize(
    ("policy", "code", "action", "reason"),
    [
        ("OnFailure", 1, "Restart", "WorkerFailed"),
        ("OnFailure", 137, "Restart", "WorkerFailed"),
        ("Never", 137, "Fail", "WorkerFailed"),
        ("ExitCode", 1, "Fail", "PermanentExitCode"),
        ("ExitCode", 2, "Fail", "PermanentExitCode"),
        ("ExitCode", 127, "Fail", "PermanentExitCode"),
        ("ExitCode", 128, "Restart", "WorkerFailed"),
        ("ExitCode", 137, "Restart", "WorkerFailed"),
        ("ExitCode", 143, "Restart", "WorkerFailed"),
        ("ExitCode", 255, "Restart", "WorkerFailed"),
        ("ExitCode", None, "Restart", "WorkerFailed"),
    ],
)
def test_restart_policy_decides_by_exit_code(policy: str, code: int | None, action: str, reason: str) -> None:
    decision = decide_failure(spec(restartPolicy=policy), failed_pod(code))
    assert (decision.action, decision.reason) == (action, reason)


@pytest.mark.parametrize(("code", "action"), [(3, "Fail"), (42, "Ignore"), (1, "Restart"), (137, "Restart")])
def test_failure_rules_take_precedence_over_restart_policy(code: int, action: str) -> None:
    rules = [
        {"exitCodes": [3], "action": "Fail"},
        {"exitCodes": [42], "action": "Ignore"},
        {"exitCodes": [1, 137], "action": "Restart"},
    ]
    decision = decide_failure(spec(restartPolicy="Never", failurePolicy={"rules": rules}), failed_pod(code))
    assert decision.action == action


@pytest.mark.parametrize(("restart", "expected"), [(1, 10), (2, 20), (3, 40), (5, 160), (6, 300), (40, 300)])
def test_backoff_doubles_up_to_the_maximum(restart: int, expected: int) -> None:
    assert backoff_seconds(spec(), restart) == expected


def test_backoff_is_configurable_per_job() -> None:
    custom = spec(failurePolicy={"backoff": {"baseSeconds": 1, "maxSeconds": 5}})
    assert [backoff_seconds(custom, n) for n in range(1, 6)] == [1, 2, 4, 5, 5]


STARTED = "2026-11-22T11:00:00Z"


def fail_worker(job_status: dict, exit_code: int, now: datetime.datetime, **spec_fields: Any) -> Any:
    job = make_job(job_status, **spec_fields)
    attempt = int(job_status.get("attempt", 0))
    observed = children(
        job, pod(job, 0, attempt=attempt), pod(job, 1, "Failed", attempt=attempt, exit_code=exit_code, reason="Error")
    )
    return plan(job, observed, now, CONFIG)


def test_worker_failure_is_a_gang_restart_after_the_backoff_delay() -> None:
    result = fail_worker({"phase": "Running", "startTime": STARTED}, 1, NOW)
    status = stored(result)
    assert status["phase"] == "Restarting"
    assert (status["attempt"], status["restartCount"], status["disruptionCount"]) == (1, 1, 0)
    assert status["nextRestartTime"] == format_time(NOW + datetime.timedelta(seconds=10))
    assert status["lastFailure"]["workerId"] == 1 and status["lastFailure"]["exitCode"] == 1
    assert sorted(d.name for d in kinds(result.actions, DeleteChild)) == ["job-worker-0", "job-worker-1"]
    assert result.requeue_after == 10
    # While the delay runs nothing is created; afterwards the new gang is.
    waiting = make_job(status)
    early = plan(waiting, children(waiting), NOW + datetime.timedelta(seconds=4), CONFIG)
    assert kinds(early.actions, CreateChild) == [] and early.requeue_after == pytest.approx(6)
    late = plan(waiting, children(waiting), NOW + datetime.timedelta(seconds=10), CONFIG)
    assert [c.name for c in kinds(late.actions, CreateChild)] == ["job-worker-0", "job-worker-1"]


def test_each_failed_worker_gets_one_worker_failed_event_besides_restarting() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED})
    observed = children(
        job,
        pod(job, 0, "Failed", exit_code=137, reason="OOMKilled"),
        pod(job, 1, "Failed", exit_code=1, reason="Error"),
    )
    result = plan(job, observed, NOW, CONFIG)
    assert [(e.type, e.reason, e.message) for e in result.events[:2]] == [
        ("Warning", "WorkerFailed", "worker 0 (pod job-worker-0) failed with exit code 137 (OOMKilled)"),
        ("Warning", "WorkerFailed", "worker 1 (pod job-worker-1) failed with exit code 1 (Error)"),
    ]
    assert [e.reason for e in result.events[2:]] == ["Restarting"]
    # The next reconcile sees the same failed pods (recorded in replacedPods, not deleted yet): no new events.
    again = make_job(result.status)
    later = plan(again, children(again, *observed.pods), NOW + datetime.timedelta(seconds=1), CONFIG)
    assert [e.reason for e in later.events] == []


def test_a_failure_that_exceeds_the_backoff_limit_still_names_the_worker() -> None:
    result = fail_worker(
        {"phase": "Running", "startTime": STARTED, "restartCount": 2, "attempt": 2}, 1, NOW, backoffLimit=2
    )
    assert [e.reason for e in result.events] == ["WorkerFailed", "BackoffLimitExceeded"]
    assert "worker 1" in result.events[0].message and "exit code 1 (Error)" in result.events[0].message


def test_worker_strategy_replaces_only_the_failed_pod() -> None:
    result = fail_worker(
        {"phase": "Running", "startTime": STARTED}, 1, NOW, failurePolicy={"restartStrategy": "Worker"}
    )
    assert [d.name for d in kinds(result.actions, DeleteChild)] == ["job-worker-1"]
    assert [w["workerId"] for w in stored(result)["workerStatuses"]] == [0]


def test_permanent_exit_code_fails_at_once() -> None:
    result = fail_worker({"phase": "Running", "startTime": STARTED}, 2, NOW, restartPolicy="ExitCode")
    assert stored(result)["phase"] == "Failed"
    assert next(c for c in stored(result)["conditions"] if c["type"] == "Failed")["reason"] == "PermanentExitCode"


def test_exceeding_the_backoff_limit_fails_the_job() -> None:
    result = fail_worker(
        {"phase": "Running", "startTime": STARTED, "restartCount": 2, "attempt": 2}, 1, NOW, backoffLimit=2
    )
    assert stored(result)["phase"] == "Failed"
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "BackoffLimitExceeded"
    assert stored(result)["restartCount"] == 2
    assert [d.name for d in kinds(result.actions, DeleteChild)] == ["job-worker-0"]  # cleanPodPolicy Running


@settings(max_examples=100, deadline=None)
@given(limit=st.integers(0, 6), exit_codes=st.lists(st.sampled_from([1, 2, 137, 143]), min_size=1, max_size=10))
def test_a_sequence_of_failures_restarts_exactly_backoff_limit_times(limit: int, exit_codes: list[int]) -> None:
    status: dict = {"phase": "Running", "startTime": STARTED}
    now = NOW
    for code in exit_codes:
        result = fail_worker(status, code, now, backoffLimit=limit)
        status = stored(result)
        now += datetime.timedelta(seconds=400)
        if status["phase"] == "Failed":
            break
    restarts = min(len(exit_codes), limit)
    assert status["restartCount"] == restarts
    assert status["attempt"] == restarts
    assert status["phase"] == ("Failed" if len(exit_codes) > limit else "Restarting")


@pytest.mark.parametrize("strategy", ["Gang", "Worker"])
def test_a_failure_is_counted_once_even_if_deleting_its_pod_failed(strategy: str) -> None:
    """The restart is written before the pods are deleted; a failed delete leaves the failed pod in place."""
    policy = {"restartStrategy": strategy, "backoff": {"baseSeconds": 1, "maxSeconds": 1}}
    first = fail_worker({"phase": "Running", "startTime": STARTED}, 1, NOW, failurePolicy=policy)
    assert (stored(first)["restartCount"], stored(first)["attempt"]) == (1, 1)
    job = make_job(first.status, failurePolicy=policy)
    failed = pod(job, 1, "Failed", exit_code=1, reason="Error")
    later = NOW + datetime.timedelta(seconds=5)
    again = plan(job, children(job, pod(job, 0), failed), later, CONFIG)
    assert (stored(again)["restartCount"], stored(again)["attempt"]) == (1, 1)
    assert stored(again)["phase"] == "Restarting" and again.events == []
    expected = ["job-worker-0", "job-worker-1"] if strategy == "Gang" else ["job-worker-1"]
    assert sorted(d.name for d in kinds(again.actions, DeleteChild)) == expected, "the delete is tried again"
    assert kinds(again.actions, CreateChild) == []
    gone = make_job(again.status, failurePolicy=policy)
    survivors = [pod(gone, 0)] if strategy == "Worker" else []
    settled = plan(gone, children(gone, *survivors), later, CONFIG)
    assert "replacedPods" not in stored(settled)
    assert [c.name for c in kinds(settled.actions, CreateChild)] == expected


def test_a_disruption_is_counted_once_even_if_deleting_its_pod_failed() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED})
    evicted = pod(job, 1, "Failed", disrupted=True, reason="Evicted")
    first = plan(job, children(job, pod(job, 0), evicted), NOW, CONFIG)
    job = make_job(first.status)
    again = plan(job, children(job, pod(job, 0), evicted), NOW, CONFIG)
    assert (stored(again)["disruptionCount"], stored(again)["attempt"]) == (1, 1)


def test_disruption_restarts_without_counting_against_the_backoff_limit() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED, "restartCount": 3}, backoffLimit=3)
    result = plan(job, children(job, pod(job, 0), pod(job, 1, "Failed", disrupted=True, reason="Evicted")), NOW, CONFIG)
    assert stored(result)["phase"] == "Restarting"
    assert (stored(result)["restartCount"], stored(result)["disruptionCount"]) == (3, 1)
    assert "nextRestartTime" not in stored(result)


def test_deadline_counts_from_the_first_start_without_suspended_time() -> None:
    status = {"phase": "Running", "startTime": STARTED, "suspendedSeconds": 1800}
    job = make_job(status, activeDeadlineSeconds=3600)
    observed = children(job, pod(job, 0), pod(job, 1))
    before = plan(job, observed, NOW + datetime.timedelta(minutes=29), CONFIG)  # 89 min since start, 59 active
    assert stored(before)["phase"] == "Running" and before.requeue_after == pytest.approx(60)
    after = plan(job, observed, NOW + datetime.timedelta(minutes=30), CONFIG)
    assert stored(after)["phase"] == "Failed"
    assert next(c for c in stored(after)["conditions"] if c["type"] == "Failed")["reason"] == "DeadlineExceeded"
    assert len(kinds(after.actions, DeleteChild)) == 2


def test_startup_timeout_fails_an_attempt_that_never_runs() -> None:
    job = make_job({"phase": "Pending", "attemptStartTime": STARTED}, startupTimeoutSeconds=600)
    stuck = pod(job, 0, "Pending", unschedulable_message="0/4 nodes are available")
    result = plan(job, children(job, stuck, pod(job, 1)), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "StartupTimeout" and "cannot schedule" in condition["message"]


def test_ttl_deletes_the_job_after_it_finished() -> None:
    status = {"phase": "Succeeded", "completionTime": STARTED}
    job = make_job(status, ttlSecondsAfterFinished=3600)
    early = plan(job, ObservedChildren(), NOW - datetime.timedelta(minutes=10), CONFIG)
    assert kinds(early.actions, DeleteJob) == [] and early.requeue_after == pytest.approx(600)
    assert kinds(plan(job, ObservedChildren(), NOW, CONFIG).actions, DeleteJob) == [DeleteJob()]


@pytest.mark.parametrize(
    ("policy", "deleted"), [("All", ["job-worker-0", "job-worker-1"]), ("Running", ["job-worker-1"]), ("None", [])]
)
def test_clean_pod_policy_decides_which_pods_go_when_finished(policy: str, deleted: list[str]) -> None:
    job = make_job({"phase": "Failed", "completionTime": STARTED}, cleanPodPolicy=policy)
    result = plan(job, children(job, pod(job, 0, "Failed"), pod(job, 1, "Running")), NOW, CONFIG)
    assert sorted(d.name for d in kinds(result.actions, DeleteChild)) == deleted


def test_rank0_success_policy_finishes_when_worker_0_succeeds() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, successPolicy="Rank0", cleanPodPolicy="None")
    result = plan(job, children(job, pod(job, 0, "Succeeded"), pod(job, 1)), NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    assert [d.name for d in kinds(result.actions, DeleteChild)] == ["job-worker-1"]


def test_suspend_deletes_workers_and_resume_starts_a_new_attempt() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, suspend=True)
    suspended = plan(job, children(job, pod(job, 0), pod(job, 1)), NOW, CONFIG)
    assert stored(suspended)["phase"] == "Suspended" and stored(suspended)["suspendTime"] == format_time(NOW)
    assert len(kinds(suspended.actions, DeleteChild)) == 2
    assert [e.reason for e in suspended.events] == ["Suspended"]
    resumed_job = make_job(suspended.status, suspend=False)
    resumed = plan(resumed_job, children(resumed_job), NOW + datetime.timedelta(seconds=90), CONFIG)
    assert stored(resumed)["suspendedSeconds"] == 90 and "suspendTime" not in stored(resumed)
    assert (stored(resumed)["attempt"], stored(resumed)["restartCount"]) == (1, 0)
    created = kinds(resumed.actions, CreateChild)
    assert [c.manifest["metadata"]["labels"]["ml.example.com/attempt"] for c in created] == ["1", "1"]


def test_a_resume_replaces_workers_the_suspension_did_not_delete() -> None:
    """The operator SIGKILLed between the suspend's status write and its pod deletes, and the job resumed before the
    next reconcile (found by tests/integration/test_kill_points.py's reasoning): the resume starts attempt 1, so the
    attempt-0 pods still running are replaced like a restart's, not kept under the new attempt's number."""
    job = make_job({"phase": "Running", "startTime": STARTED}, suspend=True)
    survivors = (pod(job, 0), pod(job, 1))
    suspended = plan(job, children(job, *survivors), NOW, CONFIG)  # its deletes never ran
    job = make_job(suspended.status, suspend=False)
    resumed = plan(job, children(job, *survivors), NOW + datetime.timedelta(seconds=5), CONFIG)
    assert stored(resumed)["attempt"] == 1
    assert sorted(d.name for d in kinds(resumed.actions, DeleteChild)) == ["job-worker-0", "job-worker-1"]
    assert sorted(stored(resumed)["replacedPods"]) == sorted(p.uid for p in survivors)
    assert not kinds(resumed.actions, CreateChild)
    job = make_job(resumed.status)
    gone = plan(job, children(job), NOW + datetime.timedelta(seconds=6), CONFIG)
    created = [c.manifest for c in kinds(gone.actions, CreateChild) if c.manifest["kind"] == "Pod"]
    assert [m["metadata"]["labels"]["ml.example.com/attempt"] for m in created] == ["1", "1"]
    assert stored(gone)["attempt"] == 1 and "replacedPods" not in stored(gone)


def test_time_queued_before_the_first_start_does_not_extend_the_deadline() -> None:
    """Created suspended, queued an hour, resumed: the deadline counts from the start, with nothing taken off."""
    queued = plan(make_job({}, suspend=True), ObservedChildren(), NOW, CONFIG).status.to_dict()
    resumed_at = NOW + datetime.timedelta(hours=1)
    job = make_job(queued, activeDeadlineSeconds=600)
    resumed = plan(job, children(job), resumed_at, CONFIG).status.to_dict()
    assert resumed.get("suspendedSeconds", 0) == 0 and "suspendTime" not in resumed
    job = make_job(resumed, activeDeadlineSeconds=600)
    started_at = resumed_at + datetime.timedelta(seconds=10)
    running = plan(job, children(job, pod(job, 0), pod(job, 1)), started_at, CONFIG).status.to_dict()
    assert running["phase"] == "Running" and running["attempt"] == 0
    job = make_job(running, activeDeadlineSeconds=600)
    later = plan(job, children(job, pod(job, 0), pod(job, 1)), started_at + datetime.timedelta(seconds=601), CONFIG)
    assert stored(later)["phase"] == "Failed"
    assert next(c for c in stored(later)["conditions"] if c["type"] == "Failed")["reason"] == "DeadlineExceeded"


@pytest.mark.parametrize("started", [False, True])
def test_every_resume_is_an_event(started: bool) -> None:
    """A job created suspended (queued) and a job suspended while running both say when they resume."""
    status = {"phase": "Running", "startTime": STARTED} if started else {}
    job = make_job(status, suspend=True)
    suspended = plan(job, children(job, *([pod(job, 0), pod(job, 1)] if started else [])), NOW, CONFIG)
    assert [e.reason for e in suspended.events] == ["Suspended"]
    job = make_job(suspended.status)
    resumed = plan(job, children(job), NOW + datetime.timedelta(minutes=5), CONFIG)
    assert [(e.type, e.reason) for e in resumed.events] == [("Normal", "Resumed")]
    again = plan(make_job(resumed.status), children(job), NOW + datetime.timedelta(minutes=6), CONFIG)
    assert again.events == [], "only the plan that ends the suspension says so"


def test_job_created_suspended_creates_no_workers() -> None:
    job = make_job({}, suspend=True)
    result = plan(job, ObservedChildren(), NOW, CONFIG)
    assert stored(result)["phase"] == "Suspended"
    assert [c.kind for c in kinds(result.actions, CreateChild)] == ["Service", "ConfigMap"]


def test_checkpoint_claim_is_created_and_mounted() -> None:
    checkpoint = {
        "enabled": True,
        "dir": "/ckpt",
        "keepLast": 3,
        "storage": {"size": "5Gi", "storageClassName": "fast", "accessModes": ["ReadWriteMany"]},
    }
    job = make_job({}, checkpoint=checkpoint)
    created = {c.kind: c.manifest for c in kinds(plan(job, ObservedChildren(), NOW, CONFIG).actions, CreateChild)}
    claim = created["PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "job-checkpoints" and "ownerReferences" not in claim["metadata"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    container = created["Pod"]["spec"]["containers"][0]
    assert {"name": "checkpoints", "mountPath": "/ckpt"} in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["CHECKPOINT_DIR"], env["CHECKPOINT_KEEP_LAST"]) == ("/ckpt/uid-1", "3")  # this run's own directory


@pytest.mark.parametrize(
    ("storage", "expected"),
    [({"storageClass": "standard"}, "standard"), ({"storageClass": "x", "storageClassName": "x"}, "x"), ({}, None)],
)
def test_the_guides_storage_class_names_the_claims_class(storage: dict, expected: str | None) -> None:
    """Seed 002's checkpoint controller reads checkpoint.storage.storageClass; it is our storageClassName."""
    job = make_job({}, checkpoint={"enabled": True, "storage": {"size": "1Gi", **storage}})
    created = {c.kind: c.manifest for c in kinds(plan(job, ObservedChildren(), NOW, CONFIG).actions, CreateChild)}
    assert created["PersistentVolumeClaim"]["spec"].get("storageClassName") == expected
