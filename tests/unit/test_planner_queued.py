"""The job planner with Kueue's decision as an input (reconcile/queued.py): held while queued, run with the
admission's placement, resumed after an eviction as a disruption."""

from __future__ import annotations

import dataclasses
import datetime

from tests.unit.test_planner import CONFIG, NOW, children, kinds, make_job, pod, stored
from trainingjob.builders.pod import QueuePlacement
from trainingjob.planning.actions import CreateChild, DeleteChild
from trainingjob.queueing.planner import Hold, QueueDecision, QueueEvent
from trainingjob.reconcile.planner import plan

WAITING = QueueDecision(
    hold=Hold("Pending", "insufficient unused quota for nvidia.com/gpu in flavor gpu, 4 more needed"),
    status={"name": "team-a", "workload": "trainingjob-job-1", "admitted": False, "reason": "Pending"},
    events=(QueueEvent("Normal", "Queued", "insufficient unused quota"),),
)
ADMITTED = QueueDecision(
    placement={"worker": QueuePlacement({"pool": "a100"}, ({"key": "pool", "operator": "Exists"},))},
    status={"name": "team-a", "workload": "trainingjob-job-1", "admitted": True, "reason": "Admitted"},
    events=(QueueEvent("Normal", "Admitted", "Workload trainingjob-job-1 admitted by ClusterQueue gpus"),),
)
PREEMPTED = QueueDecision(
    hold=Hold("Preempted", "evicted by Kueue (Preempted): to make room; the workers stop, the checkpoint stays"),
    status={"name": "team-a", "workload": "trainingjob-job-1", "admitted": False, "reason": "Preempted"},
    events=(QueueEvent("Warning", "Preempted", "to make room"),),
)


def test_a_queued_job_waits_without_workers_with_kueues_reason() -> None:
    job = make_job()
    result = plan(job, children(job, queue=WAITING), NOW, CONFIG)
    assert [a for a in kinds(result.actions, CreateChild) if a.kind == "Pod"] == []
    status = stored(result)
    assert status["phase"] == "Queued" and "4 more needed" in status["message"]
    assert status["queue"]["reason"] == "Pending" and status["suspendTime"]
    queued = next(c for c in status["conditions"] if c["type"] == "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "Pending")
    assert [e.reason for e in result.events] == ["Queued"]


def test_admission_creates_the_workers_on_the_admitted_flavor() -> None:
    job = make_job(stored_queued())
    result = plan(job, children(job, queue=ADMITTED), NOW, CONFIG)
    pods = [a.manifest for a in kinds(result.actions, CreateChild) if a.kind == "Pod"]
    assert len(pods) == 2
    assert all(p["spec"]["nodeSelector"]["pool"] == "a100" for p in pods)
    status = stored(result)
    assert status["phase"] == "Pending" and status["queue"]["admitted"]
    assert "Admitted" in [e.reason for e in result.events]
    queued = next(c for c in status["conditions"] if c["type"] == "Queued")
    assert queued["status"] == "False"


def stored_queued(**status: object) -> dict:
    job = make_job()
    return {**stored(plan(job, children(job, queue=WAITING), NOW, CONFIG)), **status}


def test_eviction_stops_the_running_workers_and_keeps_the_job() -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "attempt": 0})
    result = plan(job, children(job, pod(job, 0), pod(job, 1), queue=PREEMPTED), NOW, CONFIG)
    assert sorted(a.name for a in kinds(result.actions, DeleteChild)) == ["job-worker-0", "job-worker-1"]
    status = stored(result)
    assert (status["phase"], status["queue"]["reason"]) == ("Queued", "Preempted")
    assert status.get("disruptionCount", 0) == 0  # counted when it comes back
    # The stop says what Kueue said, as the Queued condition does, not "Suspended" (nobody set spec.suspend)
    assert status["lastStop"] == {"reason": "Preempted", "time": status["suspendTime"], "checkpointed": False}
    queued = next(c for c in status["conditions"] if c["type"] == "Queued")
    assert queued["reason"] == status["lastStop"]["reason"]


def test_readmission_after_an_eviction_is_a_new_attempt_and_a_disruption_not_a_failure() -> None:
    later = NOW + datetime.timedelta(minutes=5)
    evicted = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"})
    queued = stored(plan(evicted, children(evicted, queue=PREEMPTED), NOW, CONFIG))
    job = make_job(queued)
    result = plan(job, children(job, queue=ADMITTED), later, CONFIG)
    status = stored(result)
    assert (status["attempt"], status["disruptionCount"], status.get("restartCount", 0)) == (1, 1, 0)
    assert status["suspendedSeconds"] == 300 and "suspendTime" not in status
    resumed = [e.message for e in result.events if e.reason == "Resumed"]
    assert resumed == ["admitted by Kueue: recreating the workers, from their start, there being no checkpoint"]


def test_an_elastic_job_admitted_partially_creates_only_the_workers_admitted() -> None:
    elastic = {"workers": 4, "elastic": {"minWorkers": 2, "maxWorkers": 4}}
    job = make_job(stored_queued(), **elastic)
    partial = dataclasses.replace(ADMITTED, admitted_workers=3, status={**ADMITTED.status, "admittedWorkers": 3})
    result = plan(job, children(job, queue=partial), NOW, CONFIG)
    names = sorted(a.name for a in kinds(result.actions, CreateChild) if a.kind == "Pod")
    assert names == ["job-worker-0", "job-worker-1", "job-worker-2"]
    assert stored(result)["queue"]["admittedWorkers"] == 3
    # Running with the three: nothing more to create, none deleted, no restart for the difference with spec.workers
    running = [pod(job, i, phase="Running") for i in range(3)]
    again = plan(job, children(job, *running, queue=partial), NOW, CONFIG)
    assert [a for a in kinds(again.actions, CreateChild) if a.kind == "Pod"] == []
    assert kinds(again.actions, DeleteChild) == []


def test_a_fixed_gang_ignores_a_count_it_never_asked_to_lower() -> None:
    job = make_job(stored_queued(), workers=4)
    partial = dataclasses.replace(ADMITTED, admitted_workers=3)
    result = plan(job, children(job, queue=partial), NOW, CONFIG)
    assert len([a for a in kinds(result.actions, CreateChild) if a.kind == "Pod"]) == 4
