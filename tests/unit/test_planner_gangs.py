"""The planner with gang scheduling (reconcile/gangs.py): the gang object comes before its workers, replacements
join their survivors' gang, a whole new gang gets a new object, objects no worker needs go, quota is checked for
the whole gang, a preempted worker restarts its gang as a disruption, and status.gang says where the gang is."""

from __future__ import annotations

from typing import Any

from tests.unit.test_planner import CONFIG, NOW, children, kinds, make_job, pod, stored
from trainingjob.api import constants as k
from trainingjob.planning.actions import CreateChild, DeleteChild
from trainingjob.reconcile.planner import plan
from trainingjob.scheduling.gang import GangState, GangView, NativeWorkload
from trainingjob.scheduling.quota import NamespaceQuotas

SERVED = frozenset({NativeWorkload.api})
WORKLOAD = NativeWorkload.api


def gang(name: str, min_count: int = 2, **fields: Any) -> GangView:
    return GangView("Native", name, WORKLOAD.api_version, "Workload", f"uid-{name}", "uid-1", min_count, **fields)


def ganged(job, *pods, gangs=(), **fields):
    return children(job, *pods, gang_apis=SERVED, gangs={g.name: g for g in gangs}, **fields)


def created(result, kind: str) -> list[dict[str, Any]]:
    return [a.manifest for a in kinds(result.actions, CreateChild) if a.kind == kind]


def test_the_gang_object_is_created_first_and_the_workers_once_it_is_seen() -> None:
    job = make_job()
    first = plan(job, ganged(job), NOW, CONFIG)
    [workload] = created(first, "Workload")
    assert workload["metadata"]["name"] == "job-gang-0" and not created(first, "Pod")
    assert stored(first)["gang"]["state"] == "Waiting" and stored(first)["gang"]["reason"] == "GangPending"
    second = plan(job, ganged(job, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    pods = created(second, "Pod")
    assert len(pods) == 2 and not created(second, "Workload")
    for manifest in pods:
        assert manifest["spec"]["workloadRef"] == {"name": "job-gang-0", "podGroup": "workers"}
        assert manifest["metadata"]["labels"][k.LABEL_GANG] == "job-gang-0"


def test_without_a_served_gang_api_workers_are_created_at_once_as_before() -> None:
    job = make_job()
    result = plan(job, children(job), NOW, CONFIG)
    assert len(created(result, "Pod")) == 2 and "gang" not in stored(result)
    assert "workloadRef" not in created(result, "Pod")[0]["spec"]


def test_a_replacement_joins_the_gang_of_its_bound_survivors() -> None:
    job = make_job(status={"attempt": 1, "startTime": "2026-11-22T11:00:00Z"}, workers=3)
    survivors = [pod(job, i, gang="job-gang-0", node_name="n") for i in (0, 2)]
    result = plan(job, ganged(job, *survivors, gangs=[gang("job-gang-0", 3)]), NOW, CONFIG)
    [replacement] = created(result, "Pod")
    assert replacement["metadata"]["name"] == "job-worker-1"
    assert replacement["metadata"]["labels"][k.LABEL_ATTEMPT] == "1"
    assert replacement["spec"]["workloadRef"]["name"] == "job-gang-0"
    assert not kinds(result.actions, DeleteChild)


def test_a_whole_new_gang_gets_its_own_object_and_the_old_one_goes() -> None:
    job = make_job(status={"attempt": 1, "startTime": "2026-11-22T11:00:00Z"})
    result = plan(job, ganged(job, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    assert [m["metadata"]["name"] for m in created(result, "Workload")] == ["job-gang-1"]
    [deleted] = kinds(result.actions, DeleteChild)
    assert (deleted.kind, deleted.name, deleted.uid, deleted.api_version) == (
        "Workload",
        "job-gang-0",
        "uid-job-gang-0",
        "scheduling.k8s.io/v1alpha1",
    )


def test_a_gang_object_an_active_worker_still_refers_to_stays() -> None:
    job = make_job(status={"attempt": 1})
    old = pod(job, 0, attempt=0, gang="job-gang-0", fingerprint="old-spec")  # stale, being replaced
    result = plan(job, ganged(job, old, gangs=[gang("job-gang-0"), gang("job-gang-1")]), NOW, CONFIG)
    assert not [a for a in kinds(result.actions, DeleteChild) if a.kind == "Workload"]


def test_a_scheduled_gang_is_reported_once() -> None:
    job = make_job(status={"attempt": 0, "phase": "Pending"})
    pods = [pod(job, i, gang="job-gang-0", node_name=f"n{i}") for i in (0, 1)]
    result = plan(job, ganged(job, *pods, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    record = stored(result)["gang"]
    assert (record["state"], record["placed"], record["minCount"], record["kind"]) == ("Scheduled", 2, 2, "Workload")
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "GangScheduled")
    assert condition["status"] == "True" and condition["reason"] == "GangScheduled"
    assert [e.reason for e in result.events if e.reason == "GangScheduled"] == ["GangScheduled"]
    again = make_job(status=result.status)
    assert not [
        e
        for e in plan(again, ganged(again, *pods, gangs=[gang("job-gang-0")]), NOW, CONFIG).events
        if e.reason == "GangScheduled"
    ]


def test_a_waiting_gang_says_why_from_its_workers_or_its_object() -> None:
    job = make_job()
    refused = pod(job, 1, phase="Pending", gang="job-gang-0", unschedulable_message="0/6 nodes: Insufficient gpu")
    waiting = [pod(job, 0, phase="Pending", gang="job-gang-0"), refused]
    record = plan(job, ganged(job, *waiting, gangs=[gang("job-gang-0")]), NOW, CONFIG).status.to_dict()["gang"]
    assert (record["state"], record["reason"], record["placed"]) == ("Waiting", "Unschedulable", 0)
    assert "worker 1 cannot schedule: 0/6 nodes: Insufficient gpu" in record["message"]
    view = gang("job-gang-0", state=GangState(False, "NotEnoughResources", "queue full"))
    record = plan(job, ganged(job, *waiting, gangs=[view]), NOW, CONFIG).status.to_dict()["gang"]
    assert (record["reason"], record["message"]) == ("NotEnoughResources", "0/2 workers placed: queue full")


def test_a_provider_the_cluster_does_not_serve_blocks_without_creating_anything() -> None:
    job = make_job(scheduling={"gang": {"provider": "Volcano"}})
    result = plan(job, ganged(job), NOW, CONFIG)
    assert not created(result, "Pod") and not created(result, "PodGroup")
    blocked = next(c for c in stored(result)["conditions"] if c["type"] == "Blocked")
    assert blocked["reason"] == "GangSchedulingUnavailable" and "scheduling.volcano.sh/v1beta1" in blocked["message"]


def quota(hard: str, used: str) -> NamespaceQuotas:
    body = {
        "metadata": {"name": "gpus"},
        "spec": {"hard": {f"requests.{k.GPU_RESOURCE}": hard}},
        "status": {"hard": {f"requests.{k.GPU_RESOURCE}": hard}, "used": {f"requests.{k.GPU_RESOURCE}": used}},
    }
    return NamespaceQuotas((body,))


def test_a_gang_the_quota_has_no_room_for_creates_nothing_and_looks_again_soon() -> None:
    job = make_job(workers=4, gpuPerWorker=1)
    result = plan(job, ganged(job, quotas=quota("6", "4")), NOW, CONFIG)
    assert not created(result, "Pod") and not created(result, "Workload")
    blocked = next(c for c in stored(result)["conditions"] if c["type"] == "Blocked")
    assert blocked["reason"] == "QuotaExceeded"
    assert "ResourceQuota gpus: 2 of 6 requests.nvidia.com/gpu free now and the gang needs 4" in blocked["message"]
    assert result.requeue_after == 10.0
    assert len(created(plan(job, children(job, quotas=quota("6", "2")), NOW, CONFIG), "Pod")) == 4


def test_suspending_releases_the_gang_objects_and_the_gang_condition() -> None:
    status = {"phase": "Running", "gang": {"name": "job-gang-0", "state": "Scheduled", "reason": "GangScheduled"}}
    status["conditions"] = [
        {"type": "GangScheduled", "status": "True", "reason": "GangScheduled", "message": "", "lastTransitionTime": "x"}
    ]
    job = make_job(status=status, suspend=True)
    result = plan(job, ganged(job, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    assert [a.name for a in kinds(result.actions, DeleteChild)] == ["job-gang-0"]
    assert "gang" not in stored(result)
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "GangScheduled")
    assert condition["status"] == "False"


def test_a_finished_job_releases_its_gang_objects() -> None:
    job = make_job(status={"phase": "Succeeded", "completionTime": "2026-11-22T11:00:00Z"})
    done = [pod(job, i, phase="Succeeded", gang="job-gang-0") for i in (0, 1)]
    result = plan(job, ganged(job, *done, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    assert [(a.kind, a.name) for a in kinds(result.actions, DeleteChild)] == [("Workload", "job-gang-0")]


def test_a_worker_preempted_by_the_scheduler_restarts_the_whole_gang_as_a_disruption() -> None:
    job = make_job(status={"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}, backoffLimit=0)
    preempted = pod(
        job,
        1,
        gang="job-gang-0",
        disrupted=True,
        disruption_reason="PreemptionByScheduler",
        disruption_message="default-scheduler: preempting to accommodate a higher priority pod",
    )
    result = plan(job, ganged(job, pod(job, 0, gang="job-gang-0"), preempted, gangs=[gang("job-gang-0")]), NOW, CONFIG)
    assert sorted(a.name for a in kinds(result.actions, DeleteChild)) == ["job-worker-0", "job-worker-1"]
    status = stored(result)
    assert (status["phase"], status["disruptionCount"], status["restartCount"], status["attempt"]) == (
        "Restarting",
        1,
        0,
        1,
    )
    [event] = [e for e in result.events if e.reason == "Restarting"]
    assert "worker 1 (pod job-worker-1) was preempted by the scheduler" in event.message


def test_a_deleted_worker_is_described_by_its_disruption_condition() -> None:
    running = [{"workerId": i, "podName": f"job-worker-{i}", "phase": "Running"} for i in (0, 1)]
    job = make_job(status={"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "workerStatuses": running})
    leaving = pod(job, 1, deleting=True, disrupted=True, disruption_reason="PreemptionByScheduler")
    result = plan(job, children(job, pod(job, 0), leaving), NOW, CONFIG)
    [event] = [e for e in result.events if e.reason == "Restarting"]
    assert "worker 1 (pod job-worker-1) was preempted by the scheduler" in event.message


def test_a_worker_gone_before_any_plan_saw_it_go_is_described_by_its_departure() -> None:
    """The scheduler marks a victim and deletes it; where deletion is immediate, the cache may hold only the pod's
    final state (operator/runtime/store.py departures)."""
    running = [{"workerId": i, "podName": f"job-worker-{i}", "phase": "Running"} for i in (0, 1)]
    job = make_job(status={"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "workerStatuses": running})
    gone = pod(job, 1, deleting=True, disrupted=True, disruption_reason="PreemptionByScheduler")
    result = plan(job, children(job, pod(job, 0), departed_pods={gone.name: gone}), NOW, CONFIG)
    [event] = [e for e in result.events if e.reason == "Restarting"]
    assert "worker 1 (pod job-worker-1) was preempted by the scheduler" in event.message
    assert stored(result)["disruptionCount"] == 1 and stored(result).get("restartCount", 0) == 0
    without = plan(job, children(job, pod(job, 0)), NOW, CONFIG)
    [event] = [e for e in without.events if e.reason == "Restarting"]
    assert event.message == "worker 1 (pod job-worker-1) was deleted"
