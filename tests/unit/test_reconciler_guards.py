"""What the reconciler must never take for its workers: copies of their labels, or a cache not yet filled."""

from __future__ import annotations

import asyncio
import copy

from tests.unit.fake_api import FakeApiServer, fake_applier
from tests.unit.test_apply import CONFIG, NS, job_body, settle
from tests.unit.test_planner import NOW
from trainingjob.operator.trainingjob.reconciler import Reconciler


def copy_of_worker(server: FakeApiServer, name: str, owner_uid: str | None) -> str:
    """Same labels (job, index, attempt, spec hash) as a real worker; another or no controller."""
    manifest = copy.deepcopy(server.pods[name])
    manifest["metadata"]["name"] = f"{name}-copy"
    manifest["metadata"]["uid"] = f"{name}-copy-uid"
    if owner_uid is None:
        manifest["metadata"].pop("ownerReferences", None)
    else:
        manifest["metadata"]["ownerReferences"][0]["uid"] = owner_uid
    server.add_pod(manifest)
    return manifest["metadata"]["name"]


def running_job_with_a_copy(owner_uid: str | None) -> tuple[FakeApiServer, str]:
    async def scenario() -> tuple[FakeApiServer, str]:
        server = FakeApiServer()
        server.add_job(job_body())
        reconciler = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW)
        await settle(reconciler, server)
        for name in list(server.pods):
            server.pods[name]["status"] = {"phase": "Running"}
        await settle(reconciler, server)
        assert server.jobs["job"]["status"]["phase"] == "Running"
        copied = copy_of_worker(server, "job-worker-0", owner_uid)
        await settle(reconciler, server)
        return server, copied

    return asyncio.run(scenario())


def test_a_labelled_pod_without_owner_is_ignored() -> None:
    server, copied = running_job_with_a_copy(owner_uid=None)
    assert {"job-worker-0", "job-worker-1", copied} <= set(server.pods), "the real workers and the copy all stay"
    status = server.jobs["job"]["status"]
    assert status["phase"] == "Running" and status.get("restartCount", 0) == 0
    assert [w["podName"] for w in status["workerStatuses"]] == ["job-worker-0", "job-worker-1"]


def test_a_pod_of_an_earlier_job_with_the_same_name_is_ignored() -> None:
    server, copied = running_job_with_a_copy(owner_uid="uid-of-a-deleted-job")
    assert {"job-worker-0", "job-worker-1", copied} <= set(server.pods)
    assert server.jobs["job"]["status"]["phase"] == "Running"


def test_a_new_leader_plans_nothing_until_every_index_is_filled() -> None:
    """A job in the cache before its pods are: its running workers must not look deleted (a gang restart)."""

    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body())
        settling = Reconciler(server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW)
        await settle(settling, server)
        for name in list(server.pods):
            server.pods[name]["status"] = {"phase": "Running"}
        await settle(settling, server)
        running = copy.deepcopy(server.jobs["job"])
        assert running["status"]["phase"] == "Running"

        half_filled = {**server.indexes(NS), "worker_pods": {}}  # the job is listed, its pods not yet
        patches = len(server.status_patches)
        leader = Reconciler(half_filled, fake_applier(server), CONFIG, clock=lambda: NOW)
        leader.controller.indexes = half_filled
        leader.controller.start()
        leader.controller.enqueue_all()  # a new leader looks at every cached job
        await asyncio.sleep(0.2)
        assert len(server.status_patches) == patches and set(server.pods) == {"job-worker-0", "job-worker-1"}

        leader.indexes = server.indexes(NS)  # planning starts only once every informer has listed
        leader.controller.synced.set()
        await asyncio.sleep(0.2)
        await leader.controller.stop()
        assert server.jobs["job"]["status"].get("restartCount", 0) == 0
        assert server.jobs["job"]["status"]["phase"] == "Running" and set(server.pods) == {
            "job-worker-0",
            "job-worker-1",
        }

    asyncio.run(scenario())


def test_a_gang_object_deleted_but_still_cached_is_not_deleted_again() -> None:
    """Measured in the gang bench: 28 Workload deletes for 16 jobs, each repeated before the cache saw the first."""
    from trainingjob.config import OperatorConfig
    from trainingjob.operator.trainingjob.apply import ApplyResult
    from trainingjob.scheduling.gang import GangView, NativeWorkload

    provider = NativeWorkload()
    view = GangView("Native", "job-gang-0", provider.api.api_version, "Workload", "uid-gang-0", "uid-1", 2)
    indexes = {"worker_pods": {}, "worker_services": {}, "job_config_maps": {}, "job_claims": {}}
    indexes[provider.index] = {("ns", "job"): [view]}
    reconciler = Reconciler(indexes, None, OperatorConfig(), gang_apis=frozenset({provider.api}))  # type: ignore[arg-type]
    key = ("ns", "job")
    assert not reconciler.observed(key, "uid-1").gangs["job-gang-0"].deleting
    reconciler.remember(key, None, ApplyResult(released_pods=["uid-gang-0"]))
    assert reconciler.observed(key, "uid-1").gangs["job-gang-0"].deleting, "deleted by us: not to be deleted again"
    indexes[provider.index] = {}
    assert reconciler.observed(key, "uid-1").gangs == {}
    assert reconciler.memory[key].expectations.deleted == {}, "the expectation ends once the cache shows it gone"
