"""OperatorMetrics.observe_transition: what one status write counts, with statuses the planner really writes."""

from __future__ import annotations

import datetime

import pytest

from tests.unit.test_planner import CONFIG, NOW, children, make_job, pod
from trainingjob.api.status import JobStatus
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.reconcile.planner import plan

STARTED = "2026-11-22T11:00:00Z"
BODY = {"metadata": {"namespace": "ns", "creationTimestamp": "2026-11-22T10:59:00Z"}, "spec": {"framework": "jax"}}


def sample(metrics: OperatorMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def restarts(metrics: OperatorMetrics, reason: str) -> float:
    return sample(metrics, "trainingjob_jobs_restarted_total", namespace="ns", framework="jax", reason=reason)


def transition(old: JobStatus, new: JobStatus) -> OperatorMetrics:
    metrics = OperatorMetrics()
    metrics.observe_transition(BODY, old, new)
    return metrics


def test_first_status_counts_the_job_and_its_start_observes_time_to_running() -> None:
    job = make_job({})
    pending = plan(job, children(job), NOW, CONFIG).status
    metrics = transition(JobStatus(), pending)
    assert sample(metrics, "trainingjob_jobs_created_total", namespace="ns", framework="jax") == 1
    job = make_job(pending)
    running = plan(job, children(job, pod(job, 0), pod(job, 1)), NOW, CONFIG).status
    metrics = transition(pending, running)
    assert sample(metrics, "trainingjob_jobs_created_total", namespace="ns", framework="jax") == 0
    assert sample(metrics, "trainingjob_time_to_running_seconds_sum", framework="jax") == 3660  # 10:59 to 12:00


def test_a_failure_restart_is_counted_by_the_restarting_reason() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED})
    failed = pod(job, 1, "Failed", exit_code=1)
    restarting = plan(job, children(job, pod(job, 0), failed), NOW, CONFIG).status
    metrics = transition(job.status, restarting)
    assert restarts(metrics, "WorkerFailed") == 1


def test_a_resume_of_a_started_job_is_counted_as_resumed() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, suspend=True)
    suspended = plan(job, children(job, pod(job, 0), pod(job, 1)), NOW, CONFIG).status
    job = make_job(suspended)
    resumed = plan(job, children(job), NOW + datetime.timedelta(minutes=5), CONFIG).status
    assert resumed.to_dict()["attempt"] == 1
    metrics = transition(suspended, resumed)
    assert restarts(metrics, "Resumed") == 1
    assert restarts(metrics, "WorkersPending") == 0


def test_a_resume_after_an_earlier_restart_is_still_counted_as_resumed() -> None:
    """The Restarting condition stays (False) after a restart; its old reason is not the resume's."""
    status = {"phase": "Running", "startTime": STARTED, "attempt": 1, "restartCount": 1}
    job = make_job(status)
    running = plan(job, children(job, pod(job, 0, attempt=1), pod(job, 1, attempt=1)), NOW, CONFIG).status
    job = make_job(running, suspend=True)
    suspended = plan(job, children(job), NOW, CONFIG).status
    resumed = plan(make_job(suspended), children(job), NOW + datetime.timedelta(minutes=5), CONFIG).status
    metrics = transition(suspended, resumed)
    assert restarts(metrics, "Resumed") == 1


@pytest.mark.parametrize(("phase", "counter"), [("Succeeded", "succeeded"), ("Failed", "failed")])
def test_finishing_counts_the_outcome_and_the_duration_once(phase: str, counter: str) -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, restartPolicy="Never")
    pods = [pod(job, 0, phase), pod(job, 1, phase, exit_code=1 if phase == "Failed" else 0)]
    finished = plan(job, children(job, *pods), NOW, CONFIG).status
    metrics = transition(job.status, finished)
    labels = {"namespace": "ns", "framework": "jax", **({"reason": "WorkerFailed"} if phase == "Failed" else {})}
    assert sample(metrics, f"trainingjob_jobs_{counter}_total", **labels) == 1
    assert sample(metrics, "trainingjob_job_duration_seconds_count", framework="jax") == 1
    again = transition(finished, finished.replace(message="cleanup"))
    assert sample(again, f"trainingjob_jobs_{counter}_total", **labels) == 0


def test_a_status_patch_counts_once_per_field_and_an_empty_one_as_none() -> None:
    metrics = OperatorMetrics()
    metrics.count_status_patch(["phase", "conditions"])
    metrics.count_status_patch(["conditions"])
    metrics.count_status_patch([])
    assert sample(metrics, "trainingjob_status_patch_fields_total", field="conditions") == 2
    assert sample(metrics, "trainingjob_status_patch_fields_total", field="phase") == 1
    assert sample(metrics, "trainingjob_status_patch_fields_total", field="none") == 1
