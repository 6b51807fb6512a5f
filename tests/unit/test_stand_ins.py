"""Written views standing in for the cached ones until the cache shows them (store.Index, informers.stand_in): a plan
made between a create and its watch event (a Workload's admission, a pod event) must not create the child again."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from tests.unit.fake_api import ANSWER, Answer, FakeApiServer, fake_applier
from tests.unit.test_apply import CONFIG, KEY, NS, FakeClock, job_body, settle
from tests.unit.test_planner import NOW
from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders.endpoints import slice_view
from trainingjob.kube.reflector import Resource
from trainingjob.operator.kueue.reconciler import WorkloadReconciler
from trainingjob.operator.kueue.watches import JOB_WORKLOADS, KUEUE_WATCHES
from trainingjob.operator.runtime.informers import Watch, stand_in
from trainingjob.operator.runtime.store import WRITTEN_TTL_SECONDS, Index
from trainingjob.operator.runtime.writer import Writer
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.operator.trainingjob.watches import (
    CHILD_WATCHES,
    JOB_CONFIG_MAPS,
    JOB_ENDPOINT_SLICES,
    WORKER_PODS,
    WORKER_SERVICES,
)
from trainingjob.queueing.admission import WorkloadView
from trainingjob.queueing.planner import QueueDecision
from trainingjob.queueing.workload import API_VERSION, KIND

JOB = (NS, "job")
STARTED = "2026-11-22T11:59:58Z"


def clocked(start: float = 1000.0) -> tuple[Index, FakeClock]:
    clock = FakeClock()
    clock.now = start
    return Index(clock), clock


def test_a_created_view_is_read_until_any_event_of_the_object_files_it() -> None:
    index, _ = clocked()
    index.stand_in(JOB, (NS, "svc"), "written", created=True)
    assert list(index[JOB]) == ["written"] and JOB in index and list(index) == [JOB]
    index.put(JOB, (NS, "svc"), "as the server made it")  # a create is caught up with by any event of the object
    assert list(index[JOB]) == ["as the server made it"] and index.stand_ins == {}


def test_a_write_whose_event_came_before_its_answer_stands_in_for_nothing() -> None:
    """A Workload Kueue admitted at once: its events (created, admitted) may be filed before the create answers; a
    stand-in filed then would hide the admission for a minute."""
    index, _ = clocked()
    index.put(JOB, (NS, "workload"), "admitted")
    index.stand_in(JOB, (NS, "workload"), "as created", created=True)
    index.put(JOB, (NS, "slice"), "new")
    index.stand_in(JOB, (NS, "slice"), "new", created=False)
    assert sorted(index[JOB]) == ["admitted", "new"] and index.stand_ins == {}


def test_a_replaced_view_is_read_until_the_cache_shows_exactly_it() -> None:
    index, _ = clocked()
    index.put(JOB, (NS, "slice"), "old")
    index.stand_in(JOB, (NS, "slice"), "new", created=False)
    index.put(JOB, (NS, "slice"), "older event")  # an event from before our write: not caught up yet
    assert list(index[JOB]) == ["new"]
    index.put(JOB, (NS, "slice"), "new")
    assert list(index[JOB]) == ["new"] and index.stand_ins == {}


def test_a_stand_in_lasts_a_minute_at_most_read_or_not_and_leaves_with_its_object() -> None:
    index, clock = clocked()
    index.put(JOB, (NS, "slice"), "edited by someone")
    index.stand_in(JOB, (NS, "slice"), "ours", created=False)
    clock.now += WRITTEN_TTL_SECONDS + 1
    assert list(index[JOB]) == ["edited by someone"], "after a minute the cache is trusted again (and put right)"
    index.stand_in(("ns", "gone"), (NS, "cm"), {"a": "b"}, created=True)  # its job went, nobody reads it again
    clock.now += WRITTEN_TTL_SECONDS + 1
    index.stand_in(JOB, (NS, "other"), "x", created=True)
    assert set(index.stand_ins) == {JOB}, "expired stand-ins go on the next write, unread"
    index.remove(JOB, (NS, "other"))
    assert index.stand_ins == {} and list(index[JOB]) == ["edited by someone"]


def test_the_watch_selector_decides_what_may_stand_in() -> None:
    watch = Watch(Resource("", "v1", "services", "Service"), "a=1,b=2", stands_in=True)
    assert watch.selects({"a": "1", "b": "2", "c": "3"}) and not watch.selects({"a": "1"})
    assert Watch(Resource("", "v1", "services", "Service"), "").selects({})


def service_manifest(name: str = "job-workers", labels: dict[str, str] | None = None) -> dict[str, Any]:
    base = {k.LABEL_MANAGED_BY: k.MANAGED_BY, k.LABEL_JOB_NAME: "job"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": base if labels is None else labels},
        "spec": {"ports": [{"name": "dist", "port": 23456}]},
    }


def test_stand_in_files_what_the_watch_of_the_kind_would_file_and_nothing_else() -> None:
    indexes: dict[str, Any] = {WORKER_SERVICES: Index(), WORKER_PODS: Index(), JOB_CONFIG_MAPS: {}}
    stand_in(indexes, CHILD_WATCHES, NS, service_manifest(), created=True)
    assert set(indexes[WORKER_SERVICES].stand_ins) == {JOB}
    assert indexes[WORKER_SERVICES].stand_ins[JOB][(NS, "job-workers")].view.ports
    unlabelled = service_manifest("job-workers", {k.LABEL_JOB_NAME: "job"})  # the informer would not list it
    fresh: dict[str, Any] = {WORKER_SERVICES: Index()}
    stand_in(fresh, CHILD_WATCHES, NS, unlabelled, created=True)
    pod = {**service_manifest("job-worker-0"), "kind": "Pod"}  # pods are claimed by name (expectations.py)
    stand_in(fresh, CHILD_WATCHES, NS, pod, created=True)
    stand_in(indexes, CHILD_WATCHES, NS, {**service_manifest(), "kind": "ConfigMap", "data": {}}, created=True)
    assert fresh[WORKER_SERVICES].stand_ins == {} and indexes[WORKER_PODS].stand_ins == {}
    assert indexes[JOB_CONFIG_MAPS] == {}, "a plain dict (not the informers' index) takes nothing"


def test_a_created_workload_stands_in_without_a_uid_until_its_event() -> None:
    index = Index()
    labels = {k.LABEL_MANAGED_BY: k.MANAGED_BY, k.LABEL_JOB_NAME: "job"}
    manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "w", "labels": labels}, "spec": {}}
    stand_in({JOB_WORKLOADS: index}, KUEUE_WATCHES, NS, manifest, created=True)
    (view,) = index[JOB]
    assert view.name == "w" and view.uid == "" and not view.admitted


class LaggingCaches:
    """The job's Service, ConfigMap and slice informers, whose events have not arrived; the rest caught up."""

    def __init__(self, server: FakeApiServer) -> None:
        self.server = server
        self.lagging: dict[str, Index] = {
            name: Index() for name in (WORKER_SERVICES, JOB_CONFIG_MAPS, JOB_ENDPOINT_SLICES)
        }

    def indexes(self) -> dict[str, Any]:
        return {**self.server.indexes(NS), **self.lagging}

    def catch_up(self) -> None:
        """Every event arrives: the informers file what the server holds, by object, as the store does."""
        server = self.server
        filed = {
            WORKER_SERVICES: server.services.items(),
            JOB_CONFIG_MAPS: server.config_maps.items(),
            JOB_ENDPOINT_SLICES: ((name, slice_view(body)) for name, body in server.endpoint_slices.items()),
        }
        for index, objects in filed.items():
            for name, view in objects:
                self.lagging[index].put(JOB, (NS, name), view)


def test_a_starting_job_creates_each_child_once_though_the_caches_lag() -> None:
    async def scenario() -> None:
        server = FakeApiServer()
        server.add_job(job_body())
        caches = LaggingCaches(server)
        reconciler = Reconciler(
            caches.indexes(), fake_applier(server), CONFIG, clock=lambda: NOW, monotonic=FakeClock()
        )
        creates: list[str] = []
        for kind in ("service", "config_map", "endpoint_slice"):
            original = getattr(server, f"create_namespaced_{kind}")

            async def counted(namespace: str, body: dict, _original: Any = original, **kwargs: Any) -> Any:
                creates.append(body["kind"])
                return await _original(namespace, body, **kwargs)

            setattr(server, f"create_namespaced_{kind}", counted)
        for _ in range(4):  # pod and job events keep coming; the children's own events have not arrived
            reconciler.indexes = caches.indexes()
            await reconciler.reconcile(KEY)
        for index, name in enumerate(sorted(server.pods)):
            server.pods[name]["status"] = {"phase": "Running", "podIP": f"10.0.0.{index + 1}", "startTime": STARTED}
        for _ in range(3):
            reconciler.indexes = caches.indexes()
            await reconciler.reconcile(KEY)
        assert sorted(creates) == ["ConfigMap", "EndpointSlice", "Service"]
        caches.catch_up()
        assert all(index.stand_ins == {} for index in caches.lagging.values()), "the cache shows them: settled"
        await settle(reconciler, server, rounds=2)
        assert sorted(creates) == ["ConfigMap", "EndpointSlice", "Service"]

    asyncio.run(scenario())


class RecordingCustomApi:
    """Every custom-object write the Workload controller makes, by method name."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Answer:
            self.calls.append(name)
            return ANSWER

        return call


def test_the_workload_controller_writes_nothing_by_a_workload_the_cache_has_not_shown() -> None:
    """A stand-in has no uid to hold a write to the right object: the Workload's event plans the job again."""
    custom = RecordingCustomApi()
    reconciler = WorkloadReconciler({JOB_WORKLOADS: Index()}, Writer(None, 4, core=None, custom=custom), CONFIG)
    job = TrainingJob.from_body(job_body())
    decision = QueueDecision(active=False, workload_status={"conditions": []})
    standing = WorkloadView(name="w", uid="", queue="team", pod_sets_hash="h")
    reconciler.indexes[JOB_WORKLOADS].stand_in(JOB, (NS, "w"), standing, created=True)
    asyncio.run(reconciler.apply(job, job_body(), decision))
    assert custom.calls == []
    reconciler.indexes[JOB_WORKLOADS].put(JOB, (NS, "w"), dataclasses.replace(standing, uid="u1"))
    asyncio.run(reconciler.apply(job, job_body(), decision))
    assert sorted(custom.calls) == ["patch_namespaced_custom_object", "patch_namespaced_custom_object_status"]
