"""Status writes that only refresh worker details wait a moment for the next significant change to carry them."""

from __future__ import annotations

import asyncio
import copy

import pytest

from tests.unit.fake_api import FakeApiServer, fake_applier
from tests.unit.test_apply import CONFIG, KEY, NS, FakeClock, job_body, settle
from tests.unit.test_planner import NOW
from trainingjob.api.status import JobStatus
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.reconcile.status import (
    DETAIL_WRITE_DELAY,
    STARTING_DETAIL_WRITE_DELAY,
    hold_details,
    only_details_changed,
)

PENDING = {
    "phase": "Pending",
    "message": "0/2 workers running",
    "conditions": [
        {"type": "Running", "status": "False", "reason": "WorkersPending", "message": "0/2 workers running"}
    ],
    "workerStatuses": [{"workerId": 0, "phase": "Pending"}, {"workerId": 1, "phase": "Pending"}],
    "workers": 2,
    "restartCount": 0,
}


def changed(**changes: object) -> dict:
    status = copy.deepcopy(PENDING)
    status.update(changes)
    return status


@pytest.mark.parametrize(
    ("new", "details_only"),
    [
        (changed(message="1/2 workers running"), True),
        (changed(workerStatuses=[{"workerId": 0, "phase": "Running"}, {"workerId": 1, "phase": "Pending"}]), True),
        (changed(conditions=[{**PENDING["conditions"][0], "message": "1/2 workers running"}]), True),
        (changed(phase="Running"), False),
        (changed(conditions=[{**PENDING["conditions"][0], "status": "True", "reason": "AllWorkersRunning"}]), False),
        (changed(restartCount=1), False),
        (changed(startTime="2026-11-22T12:00:00Z"), False),
        (copy.deepcopy(PENDING), False),
    ],
)
def test_only_worker_details_count_as_details(new: dict, details_only: bool) -> None:
    assert only_details_changed(JobStatus.from_dict(PENDING), JobStatus.from_dict(new)) is details_only


def test_a_first_status_is_never_a_detail() -> None:
    assert not only_details_changed(JobStatus(), JobStatus.from_dict(PENDING))


def start_pod(server: FakeApiServer, index: int) -> None:
    server.pods[f"job-worker-{index}"]["status"] = {"phase": "Running"}


def status_writes(server: FakeApiServer) -> list[dict]:
    return [patch["status"] for patch in server.status_patches if patch["status"]]


def new_job() -> tuple[FakeApiServer, Reconciler, FakeClock]:
    server = FakeApiServer()
    server.add_job(job_body())
    clock = FakeClock()
    reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW, monotonic=clock)
    return server, reconciler, clock


def test_workers_starting_one_by_one_are_written_with_the_phase_change() -> None:
    async def scenario() -> None:
        server, reconciler, _ = new_job()
        await settle(reconciler, server)
        assert server.jobs["job"]["status"]["phase"] == "Pending"
        before = len(status_writes(server))
        start_pod(server, 0)
        await settle(reconciler, server, rounds=2)
        assert len(status_writes(server)) == before, "one worker more running is a detail: it waits"
        assert reconciler.queue.timers == 1, "and the job is requeued for when the delay is over"
        start_pod(server, 1)
        await settle(reconciler, server, rounds=2)
        writes = status_writes(server)[before:]
        assert len(writes) == 1 and writes[0]["state"] == "Running"  # written in v1, the watched version
        assert [w["phase"] for w in server.jobs["job"]["status"]["workerStatuses"]] == ["Running", "Running"]

    asyncio.run(scenario())


def test_details_alone_are_written_once_the_delay_is_over() -> None:
    async def scenario() -> None:
        server, reconciler, clock = new_job()
        await settle(reconciler, server)
        start_pod(server, 0)
        await settle(reconciler, server, rounds=1)
        assert server.jobs["job"]["status"]["message"] == "0/2 workers running"
        clock.now += DETAIL_WRITE_DELAY
        await settle(reconciler, server, rounds=1)
        assert server.jobs["job"]["status"]["message"] == "0/2 workers running", "a starting gang waits longer"
        clock.now += STARTING_DETAIL_WRITE_DELAY - DETAIL_WRITE_DELAY
        await settle(reconciler, server, rounds=1)
        assert server.jobs["job"]["status"]["message"] == "1/2 workers running"
        assert reconciler.memory[KEY].details_since is None

    asyncio.run(scenario())


def test_the_planner_holds_back_a_change_of_details_alone_for_the_operator() -> None:
    """What the reconciler used to do to a finished plan is the planner's decision: it is told for how long such a
    change has waited."""
    status = JobStatus.from_dict(PENDING)
    new = JobStatus.from_dict(changed(message="1/2 workers running"))
    assert hold_details(status, new, 0.0) == (status, STARTING_DETAIL_WRITE_DELAY), "a gang starting: the longer"
    assert hold_details(status, new, STARTING_DETAIL_WRITE_DELAY - 1) == (status, 1.0)
    assert hold_details(status, new, STARTING_DETAIL_WRITE_DELAY) == (new, None)
    assert hold_details(status, new, None) == (new, None), "a plan made outside the operator holds nothing back"
    phase = JobStatus.from_dict(changed(phase="Running"))
    assert hold_details(status, phase, 0.0) == (phase, None)
    # A running job's details (one worker of many restarted) wait the short delay only.
    running = JobStatus.from_dict(changed(phase="Running", message="2/2 workers running"))
    one_restarted = JobStatus.from_dict(changed(phase="Running", message="1/2 workers running"))
    assert hold_details(running, one_restarted, 0.0) == (running, DETAIL_WRITE_DELAY)
    assert hold_details(running, one_restarted, DETAIL_WRITE_DELAY) == (one_restarted, None)
