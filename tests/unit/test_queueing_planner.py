"""The queue planner: when a queued job may run, what it waits for, and what it writes back to its Workload."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from trainingjob.queueing.admission import Assignment, Condition, FlavorView, WorkloadView
from trainingjob.queueing.planner import QueueInputs, plan_queue

NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(seconds=90)


def view(**changes: Any) -> WorkloadView:
    base = WorkloadView(name="trainingjob-bert-abcde", uid="w-1", queue="team-a", pod_sets_hash="h1")
    return dataclasses.replace(base, **changes)


ADMITTED = view(
    cluster_queue="gpus",
    assignments=(Assignment("worker", {"nvidia.com/gpu": "a100"}, 4),),
    conditions={"QuotaReserved": Condition(True), "Admitted": Condition(True)},
)
PENDING = view(
    conditions={
        "QuotaReserved": Condition(
            False, "Pending", "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu"
        )
    }
)


def inputs(workload: WorkloadView | None, **changes: Any) -> QueueInputs:
    base = QueueInputs(
        queue="team-a", priority_class=None, workload_name="trainingjob-bert-abcde", pod_sets_hash="h1", workload=None
    )
    return dataclasses.replace(base, workload=workload, **changes)


def test_a_job_without_the_queue_label_is_not_queued() -> None:
    decision = plan_queue(dataclasses.replace(inputs(None), queue=None), NOW)
    assert decision.hold is None and decision.status is None and not decision.create


def test_a_job_that_leaves_its_queue_deletes_its_workload() -> None:
    decision = plan_queue(dataclasses.replace(inputs(PENDING), queue=None), NOW)
    assert decision.delete == PENDING and decision.hold is None


def test_a_new_queued_job_creates_its_workload_and_waits() -> None:
    decision = plan_queue(inputs(None), NOW)
    assert decision.create
    assert decision.hold is not None and decision.hold.reason == "Pending"
    assert decision.status is not None and decision.status["queuedSince"] == "2026-11-28T12:00:00Z"
    assert [e.reason for e in decision.events] == ["Queued"]


def test_pending_shows_kueues_own_reason_with_a_warning_when_it_can_never_fit() -> None:
    decision = plan_queue(inputs(PENDING), NOW)
    assert decision.hold is not None and "insufficient unused quota" in decision.hold.message
    never = view(conditions={"QuotaReserved": Condition(False, "Inadmissible", "LocalQueue team-a doesn't exist")})
    decision = plan_queue(inputs(never), NOW)
    assert decision.hold is not None and decision.hold.reason == "Inadmissible"
    assert [(e.type, e.message) for e in decision.events] == [("Warning", "LocalQueue team-a doesn't exist")]


def test_the_same_wait_records_no_second_event() -> None:
    first = plan_queue(inputs(PENDING), NOW)
    again = plan_queue(inputs(PENDING, previous=first.status), LATER)
    assert again.events == () and again.status == first.status


def test_admission_runs_the_job_with_the_flavors_placement_and_counts_the_time_queued() -> None:
    waiting = plan_queue(inputs(PENDING), NOW)
    flavors = {"a100": FlavorView("a100", {"pool": "a100"})}
    decision = plan_queue(inputs(ADMITTED, previous=waiting.status, flavors=flavors), LATER)
    assert decision.hold is None
    assert dict(decision.placement["worker"].node_selector) == {"pool": "a100"}
    assert decision.status is not None
    assert decision.status["admitted"] and decision.status["queuedSeconds"] == 90
    assert "queuedSince" not in decision.status and decision.status["clusterQueue"] == "gpus"
    assert [e.reason for e in decision.events] == ["Admitted"]


def test_eviction_holds_the_workers_and_returns_the_quota_only_once_they_are_gone() -> None:
    evicted = dataclasses.replace(
        ADMITTED,
        conditions={**ADMITTED.conditions, "Evicted": Condition(True, "Preempted", "Preempted to accommodate x")},
    )
    running = plan_queue(inputs(evicted, workers_left=2), NOW)
    assert running.hold is not None and running.hold.reason == "Preempted"
    assert "checkpoint stays" in running.hold.message
    assert running.workload_status is None
    assert [(e.type, e.reason) for e in running.events] == [("Warning", "Preempted")]
    stopped = plan_queue(inputs(evicted, workers_left=0), NOW)
    assert stopped.workload_status is not None and stopped.workload_status["admission"] is None
    conditions = {c["type"]: c for c in stopped.workload_status["conditions"]}
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["Requeued"]["status"] == "True"  # after a preemption Kueue expects it queued again


@pytest.mark.parametrize(("reason", "requeued"), [("Preempted", "True"), ("ClusterQueueStopped", "False")])
def test_requeued_follows_kueues_rule(reason: str, requeued: str) -> None:
    evicted = dataclasses.replace(ADMITTED, conditions={**ADMITTED.conditions, "Evicted": Condition(True, reason, "")})
    status = plan_queue(inputs(evicted), NOW).workload_status
    assert status is not None
    assert {c["type"]: c["status"] for c in status["conditions"]}["Requeued"] == requeued


def test_a_spec_change_while_queued_replaces_the_workload() -> None:
    decision = plan_queue(inputs(PENDING, pod_sets_hash="h2"), NOW)
    assert decision.delete == PENDING and decision.hold is not None and not decision.create
    assert "WorkloadReplaced" in [e.reason for e in decision.events]


def test_a_queue_change_replaces_the_workload() -> None:
    decision = plan_queue(inputs(ADMITTED, queue="team-b"), NOW)
    assert decision.delete == ADMITTED and decision.hold is not None


def test_a_workload_being_deleted_is_waited_for_before_the_next_is_created() -> None:
    decision = plan_queue(inputs(view(deleting=True)), NOW)
    assert decision.hold is not None and not decision.create and decision.delete is None


def test_finishing_marks_the_workload_finished_once() -> None:
    decision = plan_queue(inputs(ADMITTED, finished_phase="Succeeded"), NOW)
    assert decision.hold is None and decision.workload_status is not None
    assert decision.workload_status["conditions"][0]["type"] == "Finished"
    finished = dataclasses.replace(ADMITTED, conditions={**ADMITTED.conditions, "Finished": Condition(True)})
    assert plan_queue(inputs(finished, finished_phase="Succeeded"), NOW).workload_status is None


def test_without_kueue_the_job_waits_and_says_why() -> None:
    decision = plan_queue(inputs(None, kueue_served=False), NOW)
    assert decision.hold is not None and decision.hold.reason == "KueueNotInstalled" and not decision.create
    assert decision.events[0].type == "Warning"


def test_an_unknown_priority_class_creates_no_workload() -> None:
    decision = plan_queue(inputs(None, priority_class="urgent", priorities={"high": 100}), NOW)
    assert decision.hold is not None and decision.hold.reason == "PriorityClassNotFound" and not decision.create


def test_suspending_a_queued_job_deactivates_its_workload_and_resuming_activates_it() -> None:
    suspend = plan_queue(inputs(ADMITTED, suspended=True), NOW)
    assert suspend.active is False and suspend.hold is not None
    inactive = dataclasses.replace(PENDING, active=False)
    assert plan_queue(inputs(inactive, suspended=True), NOW).active is None
    resume = plan_queue(inputs(inactive), NOW)
    assert resume.active is True and resume.hold is not None


PARTIAL = dataclasses.replace(ADMITTED, assignments=(Assignment("worker", {"nvidia.com/gpu": "a100"}, 3),))


def test_a_partial_admission_of_an_elastic_job_runs_the_workers_admitted_and_says_why() -> None:
    waiting = plan_queue(inputs(PENDING, workers=4, min_workers=2), NOW)
    decision = plan_queue(inputs(PARTIAL, previous=waiting.status, workers=4, min_workers=2), LATER)
    assert decision.hold is None and decision.admitted_workers == 3
    assert decision.status is not None and decision.status["admittedWorkers"] == 3
    assert "3 of the 4 workers asked" in decision.status["message"] and "minWorkers is 2" in decision.status["message"]
    assert [e.reason for e in decision.events] == ["Admitted"] and "3 of the 4" in decision.events[0].message


@pytest.mark.parametrize(
    ("workload", "min_workers"),
    [(ADMITTED, 2), (PARTIAL, None)],  # all admitted; a job without minCount (no partial admission asked for)
)
def test_a_full_admission_names_no_count(workload: WorkloadView, min_workers: int | None) -> None:
    decision = plan_queue(inputs(workload, workers=4, min_workers=min_workers), NOW)
    assert decision.hold is None and decision.admitted_workers is None
    assert decision.status is not None and "admittedWorkers" not in decision.status


def test_a_prebuilt_workload_is_waited_for_never_made() -> None:
    """MultiKueue's copy of a job on a worker cluster names the Workload it copied there: the job waits for it."""
    decision = plan_queue(inputs(None, prebuilt=True), NOW)
    assert not decision.create and decision.hold is not None and decision.hold.reason == "Pending"
    assert "trainingjob-bert-abcde" in decision.hold.message and "prebuilt-workload-name" in decision.hold.message


def test_a_prebuilt_workload_is_used_as_it_is_never_replaced() -> None:
    """Built elsewhere from the same spec, perhaps under another operator's defaults: its pod sets are not ours to
    judge, and deleting it would take the job away from MultiKueue."""
    other = dataclasses.replace(ADMITTED, pod_sets_hash="from-the-manager")
    decision = plan_queue(inputs(other, prebuilt=True), NOW)
    assert decision.delete is None and decision.hold is None and decision.placement
    assert plan_queue(inputs(other), NOW).delete == other  # a Workload of our own is replaced
