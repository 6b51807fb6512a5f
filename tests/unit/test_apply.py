"""The apply layer and the reconciler's bookkeeping of its writes, against a fake API server (tests/unit/fake_api.py).

What matters here is which resourceVersion a write leaves behind: the reconciler skips job bodies it knows it has
written over, so it must never take a write the server did not make for one it did.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.fake_api import FakeApiServer, fake_applier, merge_patch
from tests.unit.test_planner import NOW, make_job
from trainingjob.api import constants as k
from trainingjob.api.status import JobStatus, Phase
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig
from trainingjob.operator.runtime.writer import status_patch
from trainingjob.operator.trainingjob.progress import PROGRESS_WRITE_INTERVAL
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.planning.actions import DeleteChild
from trainingjob.progress.report import Report
from trainingjob.reconcile.plan import JobPlan

NS = "ns"
KEY = (NS, "job")
CONFIG = OperatorConfig(lease_namespace=None)


def job_body(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": "job", "namespace": NS, "uid": "uid-1", "generation": 1, "finalizers": [k.FINALIZER]},
        "spec": {"framework": "pytorch", "image": "img", "command": ["train"], "workers": 2, **spec},
        "status": status or {},
    }


def stray_worker(server: FakeApiServer, index: int, status: dict[str, Any] | None = None) -> str:
    """A worker pod of the job as the planner would create it (or, when the job did not ask for it, left over)."""
    job = make_job(server.jobs["job"]["status"])
    manifest = {**desired_worker_pod(job, index, 0, CONFIG), "status": status or {}}
    server.add_pod(manifest)
    return manifest["metadata"]["name"]


def applied(server: FakeApiServer, body: dict[str, Any], plan: JobPlan, count: Any = None) -> Any:
    from trainingjob.api.types import TrainingJob

    return asyncio.run(fake_applier(server, count).apply(TrainingJob.from_body(body), body, plan))


def test_a_delete_with_unchanged_status_is_checked_but_is_no_write_of_the_job() -> None:
    server = FakeApiServer()
    body = server.add_job(job_body({"phase": "Suspended"}))
    pod = stray_worker(server, 0)
    result = applied(server, body, JobPlan(actions=[DeleteChild("Pod", pod)], status=JobStatus(phase=Phase.SUSPENDED)))
    assert pod not in server.pods
    assert server.status_patches, "the precondition is still checked before the delete"
    assert server.jobs["job"]["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    assert not result.job_changed and not result.stale


def test_each_status_patch_sent_is_counted_by_the_top_level_fields_it_changes() -> None:
    """trainingjob_status_patch_fields_total: what the benchmark's writes per job break down into. An empty patch
    (the check before a delete) is counted too, with no field; a status left as it was sends and counts nothing."""
    server, counted = FakeApiServer(), []
    body = server.add_job(job_body({"phase": "Pending", "message": "waiting"}))
    applied(
        server,
        body,
        JobPlan(status=JobStatus(phase=Phase.RUNNING, message="waiting")),
        lambda f: counted.append(set(f)),
    )
    body = server.jobs["job"]
    applied(
        server,
        body,
        JobPlan(status=JobStatus(phase=Phase.RUNNING, message="waiting")),
        lambda f: counted.append(set(f)),
    )
    pod = stray_worker(server, 0)
    delete = JobPlan(actions=[DeleteChild("Pod", pod)], status=JobStatus(phase=Phase.RUNNING, message="waiting"))
    applied(server, server.jobs["job"], delete, lambda f: counted.append(set(f)))
    assert counted == [{"state"}, set()]  # in the written version's names: v1 calls the phase `state`
    assert len(server.status_patches) == 2


def test_a_status_change_is_a_write_of_the_job() -> None:
    server = FakeApiServer()
    body = server.add_job(job_body({"phase": "Pending"}))
    result = applied(server, body, JobPlan(status=JobStatus(phase=Phase.RUNNING)))
    assert result.job_changed and server.jobs["job"]["status"] == {"phase": "Running"}


def test_a_plan_from_a_stale_job_deletes_nothing() -> None:
    server = FakeApiServer()
    stale = server.add_job(job_body({"phase": "Suspended"}))
    server.jobs["job"]["metadata"]["resourceVersion"] = server.next_version()  # someone else wrote since
    pod = stray_worker(server, 0)
    result = applied(server, stale, JobPlan(actions=[DeleteChild("Pod", pod)], status=JobStatus(phase=Phase.SUSPENDED)))
    assert result.stale and pod in server.pods


async def settle(reconciler: Reconciler, server: FakeApiServer, rounds: int = 6) -> None:
    """Reconcile with the caches caught up each time, as after every watch event."""
    for _ in range(rounds):
        reconciler.indexes = server.indexes(NS)
        await reconciler.reconcile(KEY)


def test_a_job_whose_plan_only_deleted_pods_is_still_reconciled_afterwards() -> None:
    """A no-op status write used to be taken for a write: every later reconcile of the job was skipped."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body(suspend=True))
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW)
        await settle(reconciler, server)
        assert server.jobs["job"]["status"]["phase"] == "Suspended"
        for index in (0, 1):
            pod = stray_worker(server, index)
            await settle(reconciler, server, rounds=1)
            assert pod not in server.pods, f"stray pod {pod} of a suspended job must be deleted"

    asyncio.run(scenario())


def test_a_body_the_reconciler_wrote_over_is_not_planned_from_again() -> None:
    """Until the cache shows our own status write, planning from the body before it would only redo that work."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body(suspend=True))
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW)
        await settle(reconciler, server)
        server.jobs["job"]["spec"]["suspend"] = False  # resumed: the next plan writes status and creates pods
        server.jobs["job"]["metadata"]["resourceVersion"] = server.next_version()
        lagging = server.indexes(NS)
        await settle(reconciler, server, rounds=1)
        assert set(server.pods) == {"job-worker-0", "job-worker-1"}
        patches = len(server.status_patches)
        reconciler.indexes = lagging
        await reconciler.reconcile(KEY)
        assert len(server.status_patches) == patches

    asyncio.run(scenario())


def test_a_failure_whose_pod_delete_failed_is_counted_once() -> None:
    """The restart is written first, then the pods are deleted; one delete failing must not count it again."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}))
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW)
        stray_worker(server, 0, {"phase": "Running"})
        exited = {"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
        failed = stray_worker(server, 1, {"phase": "Failed", "containerStatuses": [exited]})
        server.failing_deletes.add(failed)
        reconciler.indexes = server.indexes(NS)
        with pytest.raises(ApiException):
            await reconciler.reconcile(KEY)
        assert server.jobs["job"]["status"]["restartCount"] == 1 and failed in server.pods
        server.failing_deletes.clear()
        await settle(reconciler, server)
        status = server.jobs["job"]["status"]
        assert (status["restartCount"], status["attempt"], status["phase"]) == (1, 1, "Restarting")
        assert failed not in server.pods and "replacedPods" not in status

    asyncio.run(scenario())


def test_status_patch_removes_nested_keys_the_new_status_dropped() -> None:
    old = {
        "phase": "Restarting",
        "lastFailure": {"workerId": 1, "exitCode": 137, "reason": "OOMKilled", "time": "t1"},
        "progress": {"percent": 40.0, "estimatedRemainingSeconds": 600, "metrics": {"loss": 0.5}},
    }
    new = {
        "phase": "Restarting",
        "lastFailure": {"workerId": 0, "reason": "Error", "time": "t2"},
        "progress": {"percent": 40.0, "metrics": {"loss": 0.5}},
    }
    patch = status_patch(old, new)
    assert patch == {
        "lastFailure": {"workerId": 0, "exitCode": None, "reason": "Error", "time": "t2"},
        "progress": {"estimatedRemainingSeconds": None},
    }
    assert merge_patch(old, patch) == new


JSON_LEAVES = st.one_of(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2))
JSON_OBJECTS = st.recursive(
    JSON_LEAVES, lambda children: st.dictionaries(st.sampled_from("abcd"), children, max_size=4), max_leaves=12
)
STATUSES = st.dictionaries(st.sampled_from("abcdef"), JSON_OBJECTS, max_size=5)


@settings(max_examples=300, deadline=None)
@given(old=STATUSES, new=STATUSES)
def test_status_patch_merged_onto_the_old_status_gives_the_new_one(old: dict, new: dict) -> None:
    assert merge_patch(old, status_patch(old, new)) == new
    assert status_patch(new, new) == {}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_reports_is_written_once_per_interval_however_often_the_job_is_reconciled() -> None:
    """Every reconcile (our own write echoing back, a pod event) used to write the pending report at once."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}))
        stray_worker(server, 0, {"phase": "Running"})
        stray_worker(server, 1, {"phase": "Running"})
        clock = FakeClock()
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW, monotonic=clock)
        await settle(reconciler, server)
        for step in range(1, 101):
            reconciler.report_progress(KEY, Report(step=step, total_steps=100, received="2026-11-22T12:00:00Z"))
            await settle(reconciler, server, rounds=1)
            clock.now += 0.05
        assert reconciler.queue.timers == 1, "the withheld report is requeued for the end of the interval"
        clock.now += PROGRESS_WRITE_INTERVAL
        await settle(reconciler, server, rounds=2)
        writes = [p for p in server.status_patches if "progressDetails" in p["status"]]  # v1's name
        assert len(writes) == 3, "at 0 s, at 3 s, and the last report once the interval is over"
        assert server.jobs["job"]["status"]["progress"]["step"] == 100
        assert reconciler.memory[KEY].progress.report is None

    asyncio.run(scenario())


def test_a_job_that_finishes_within_the_progress_interval_keeps_its_last_report_and_checkpoint() -> None:
    """Seen in a real run: the last report (100 %, the final checkpoint) came less than PROGRESS_WRITE_INTERVAL
    after the previous write, was held back, and the job Succeeded with 16.7 % and no lastCheckpoint."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}))
        stray_worker(server, 0, {"phase": "Running"})
        stray_worker(server, 1, {"phase": "Running"})
        clock = FakeClock()
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW, monotonic=clock)
        await settle(reconciler, server)
        reconciler.report_progress(KEY, Report(epoch=1, total_epochs=6, received="2026-11-22T12:00:00Z"))
        await settle(reconciler, server, rounds=2)
        assert server.jobs["job"]["status"]["progress"]["epoch"] == 1
        clock.now += 0.5
        checkpoint = {"path": "/checkpoints/ckpt-6.json", "epoch": 6}
        final = Report(epoch=6, total_epochs=6, checkpoint=checkpoint, received="2026-11-22T12:00:01Z")
        reconciler.report_progress(KEY, final)
        for name in ("job-worker-0", "job-worker-1"):
            server.pods[name]["status"] = {"phase": "Succeeded"}
        await settle(reconciler, server, rounds=3)  # all within the interval: nothing else would bring it back
        status = server.jobs["job"]["status"]
        assert status["phase"] == "Succeeded"
        assert (status["progress"]["epoch"], status["progress"]["percent"]) == (6, 100.0)
        assert status["lastCheckpoint"]["path"] == "/checkpoints/ckpt-6.json"
        assert reconciler.memory[KEY].progress.report is None

    asyncio.run(scenario())
