"""A finished job's status follows its pods as cleanup removes them: no worker stays `Running` once its pod is
being deleted or gone, and the pod counters count what is left."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_planner import CONFIG, NOW, children, make_job, pod, stored
from trainingjob.api.status import JobStatus
from trainingjob.reconcile.finished import finished_worker_details
from trainingjob.reconcile.planner import plan

STARTED = "2026-11-22T11:00:00Z"


def failed_job_status() -> dict[str, Any]:
    """The status of a 2-worker job whose worker 1 failed while worker 0 ran (what cleanup starts from)."""
    running = make_job({"phase": "Running", "startTime": STARTED}, restartPolicy="Never")
    failed = pod(running, 1, "Failed", exit_code=3, reason="Error", node_name="tj-local-0")
    return stored(plan(running, children(running, pod(running, 0, node_name="tj-local-0"), failed), NOW, CONFIG))


def phases(status: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(w["phase"], w.get("reason")) for w in status["workerStatuses"]]


def test_the_worker_cleanup_deletes_is_terminating_in_the_status_that_ends_the_job() -> None:
    status = failed_job_status()
    assert status["phase"] == "Failed"
    assert phases(status) == [("Terminating", "PodDeleted"), ("Failed", "Error")]
    assert status["workerStatuses"][0]["message"] == "the job finished; its pod is being deleted (it was Running)"
    assert status["workers"] == 2  # both pods still exist: the Terminating one counts until it is gone


def test_finished_entries_follow_the_pods_until_they_are_gone() -> None:
    finished = failed_job_status()
    job = make_job(finished, restartPolicy="Never")
    failed = pod(job, 1, "Failed", exit_code=3, reason="Error", node_name="tj-local-0")
    # The deleted worker is stopped by its SIGTERM while still Terminating: its exit code says nothing.
    stopping = pod(job, 0, "Failed", exit_code=143, deleting=True, node_name="tj-local-0")
    meanwhile = plan(job, children(job, stopping, failed), NOW, CONFIG)
    assert stored(meanwhile) == finished and not meanwhile.actions  # nothing to write or do

    gone = stored(plan(job, children(job, failed), NOW, CONFIG))
    assert phases(gone) == [("Deleted", "PodDeleted"), ("Failed", "Error")]
    assert gone["workerStatuses"][0]["message"] == "the pod was deleted after the job finished"
    assert gone["workers"] == 1
    assert stored(plan(make_job(gone, restartPolicy="Never"), children(job, failed), NOW, CONFIG)) == gone  # settled

    all_gone = stored(plan(make_job(gone, restartPolicy="Never"), children(job), NOW, CONFIG))
    assert phases(all_gone) == [("Deleted", "PodDeleted"), ("Deleted", "PodDeleted")]
    failed_entry = all_gone["workerStatuses"][1]
    assert (failed_entry["exitCode"], failed_entry["message"]) == (
        3,
        "the pod was deleted after the job finished (it was Failed)",
    )
    assert all_gone["workers"] == 0


@pytest.mark.parametrize("policy", ["Running", "All"])
def test_a_succeeded_job_keeps_no_running_worker(policy: str) -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, successPolicy="Rank0", cleanPodPolicy=policy)
    result = plan(job, children(job, pod(job, 0, "Succeeded", exit_code=0), pod(job, 1)), NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    # With All the finished worker 0 is deleted too; it is not running, so its entry stays Succeeded until it is gone.
    assert phases(stored(result)) == [("Succeeded", None), ("Terminating", "PodDeleted")]


def test_cleanup_policy_none_keeps_a_running_worker_running_and_says_so() -> None:
    job = make_job({"phase": "Running", "startTime": STARTED}, restartPolicy="Never", cleanPodPolicy="None")
    failed = pod(job, 1, "Failed", exit_code=3)
    result = plan(job, children(job, pod(job, 0), failed), NOW, CONFIG)
    assert phases(stored(result)) == [("Running", None), ("Failed", None)]  # true: nothing deletes it
    later = plan(
        make_job(stored(result), cleanPodPolicy="None"), children(job, pod(job, 0, "Succeeded"), failed), NOW, CONFIG
    )
    assert phases(stored(later)) == [("Succeeded", None), ("Failed", None)]


def test_role_counts_count_the_pods_left() -> None:
    status = {
        "workerStatuses": [
            {"workerId": 0, "role": "chief", "podName": "j-chief-0", "phase": "Succeeded"},
            {"workerId": 0, "podName": "j-worker-0", "phase": "Running"},
            {"workerId": 0, "role": "ps", "podName": "j-ps-0", "phase": "NotCreated", "reason": "AdmissionDenied"},
        ],
        "roleStatuses": {
            "chief": {"replicas": 1, "pending": 0, "running": 0, "succeeded": 1, "failed": 0},
            "worker": {"replicas": 1, "pending": 0, "running": 1, "succeeded": 0, "failed": 0},
            "ps": {"replicas": 1, "pending": 0, "running": 0, "succeeded": 0, "failed": 0},
        },
    }
    details = (
        JobStatus.from_dict(status).replace(**finished_worker_details(JobStatus.from_dict(status), [], ())).to_dict()
    )
    assert [w["phase"] for w in details["workerStatuses"]] == ["Deleted", "Deleted", "NotCreated"]
    assert details["workers"] == 0
    assert details["roleStatuses"]["worker"] == {"replicas": 1, "pending": 0, "running": 0, "succeeded": 0, "failed": 0}
    assert details["roleStatuses"]["chief"]["succeeded"] == 0


def test_an_edit_of_a_finished_jobs_spec_is_observed_and_changes_nothing_else() -> None:
    """Found by the update fuzzing: an edited finished job never had a status for its new generation, so a client
    waiting for observedGeneration waited forever; the edit is observed, and one status write is all it costs."""
    job = make_job(failed_job_status(), restartPolicy="Never")
    failed = pod(job, 1, "Failed", exit_code=3, reason="Error", node_name="tj-local-0")
    settled = stored(plan(job, children(job, failed), NOW, CONFIG))  # worker 0's pod gone, as cleanup left it
    assert settled["observedGeneration"] == 2
    assert stored(plan(make_job(settled, restartPolicy="Never"), children(job, failed), NOW, CONFIG)) == settled
    edited = make_job({**settled, "observedGeneration": 1}, restartPolicy="Never", workers=5, suspend=True)
    result = plan(edited, children(job, failed), NOW, CONFIG)
    assert stored(result) == settled and not result.actions
