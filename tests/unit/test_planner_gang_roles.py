"""Gang scheduling with roles and elastic PyTorch, each scenario one call to plan(), no server.

Proves how the two combine: a gang holds every role's pods (chief, parameter servers, evaluator, MPI launcher) and
its minCount and minResources count them with their own resources; an elastic gang holds the elastic minimum, so
scaling within the bounds keeps the gang object, and a preempted worker other than 0 is replaced alone into the
running gang (a disruption) while losing worker 0 starts a new gang; the quota gate and the admission check count
each role's own requests.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.test_planner import stored
from tests.unit.test_planner_roles import (
    CONFIG,
    NOW,
    PS_ROLES,
    STARTED,
    created,
    deleted,
    elastic_job,
    make_job,
    pod,
    ps_job,
    workers,
)
from tests.unit.test_webhook_decisions import Cluster, quota, request
from trainingjob.api import constants as k
from trainingjob.api.replicas import desired_replicas
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_data
from trainingjob.operator.trainingjob.quota_gate import creates_workers
from trainingjob.planning.actions import CreateChild
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.planner import plan
from trainingjob.scheduling.gang import Coscheduling, GangView, NativeWorkload
from trainingjob.scheduling.quota import NamespaceQuotas
from trainingjob.webhooks.validation import validate

NATIVE = frozenset({NativeWorkload.api})


def workload(name: str, min_count: int) -> GangView:
    api = NativeWorkload.api
    return GangView("Native", name, api.api_version, api.kind, f"uid-{name}", "uid-1", min_count)


def observe(job: TrainingJob, pods: list[PodView], gangs: tuple[GangView, ...] = (), **fields: Any) -> ObservedChildren:
    return ObservedChildren(
        pods=tuple(pods),
        service_exists=True,
        config_data=desired_config_data(job),
        gang_apis=fields.pop("gang_apis", NATIVE),
        gangs={g.name: g for g in gangs},
        **fields,
    )


def manifests(result: Any, kind: str) -> list[dict[str, Any]]:
    return [a.manifest for a in result.actions if isinstance(a, CreateChild) and a.kind == kind]


def in_gang(pods: list[PodView], name: str) -> list[PodView]:
    return [PodView(**{**p.__dict__, "gang": name, "node_name": "node"}) for p in pods]


def min_count(manifest: dict[str, Any]) -> int:
    return manifest["spec"]["podGroups"][0]["policy"]["gang"]["minCount"]


def test_a_tensorflow_gang_counts_every_role_and_every_role_joins_it() -> None:
    job = ps_job()  # chief, 2 parameter servers, an evaluator, 2 workers
    [gang] = manifests(plan(job, observe(job, []), NOW, CONFIG), "Workload")
    assert (gang["metadata"]["name"], min_count(gang)) == ("job-gang-0", 6)
    pods = manifests(plan(job, observe(job, [], (workload("job-gang-0", 6),)), NOW, CONFIG), "Pod")
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(
        f"job-{r.role}-{r.index}" for r in desired_replicas(job.spec)
    )
    assert all(p["spec"]["workloadRef"] == {"name": "job-gang-0", "podGroup": "workers"} for p in pods)


def test_an_mpi_launcher_and_one_worker_are_a_gang_of_two() -> None:
    job = make_job(framework="mpi", workers=1, roles={"launcher": {}})
    [gang] = manifests(plan(job, observe(job, []), NOW, CONFIG), "Workload")
    assert min_count(gang) == 2
    alone = make_job(framework="mpi", workers=1)
    assert not manifests(plan(alone, observe(alone, []), NOW, CONFIG), "Workload"), "one pod needs no gang"


def test_min_resources_add_each_role_s_own_requests() -> None:
    roles = {**PS_ROLES, "ps": {"replicas": 2, "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}}
    job = make_job(
        roles=roles,
        resources={"requests": {"cpu": "500m"}},
        scheduling={"gang": {"provider": "Coscheduling"}},
    )
    served = frozenset({Coscheduling.api})
    [group] = manifests(plan(job, observe(job, [], gang_apis=served), NOW, CONFIG), "PodGroup")
    # chief, evaluator and 2 workers at 500m each, 2 parameter servers at 2 CPUs and 1Gi each.
    assert group["spec"] == {"minMember": 6, "minResources": {"cpu": "6", "memory": str(2 * 2**30)}}


def test_an_elastic_gang_holds_the_elastic_minimum_unless_min_count_says_otherwise() -> None:
    job = elastic_job(workers=3, phase="Pending", startTime=None)
    [gang] = manifests(plan(job, observe(job, []), NOW, CONFIG), "Workload")
    assert min_count(gang) == 2  # elastic.minWorkers: torchrun starts with 2 and the others join
    explicit = make_job(
        framework="pytorch",
        workers=3,
        elastic={"minWorkers": 2, "maxWorkers": 4},
        scheduling={"gang": {"minCount": 3}},
    )
    [gang] = manifests(plan(explicit, observe(explicit, []), NOW, CONFIG), "Workload")
    assert min_count(gang) == 3


def test_scaling_an_elastic_job_keeps_its_gang_object_and_adds_to_it() -> None:
    up = elastic_job(workers=4, generation=3)
    result = plan(up, observe(up, in_gang(workers(up, 3), "job-gang-0"), (workload("job-gang-0", 2),)), NOW, CONFIG)
    [added] = manifests(result, "Pod")
    assert added["metadata"]["name"] == "job-worker-3"
    assert added["spec"]["workloadRef"]["name"] == "job-gang-0"
    assert not manifests(result, "Workload") and deleted(result) == []
    assert stored(result)["gang"]["state"] == "Scheduled" and stored(result).get("restartCount", 0) == 0
    down = elastic_job(workers=2, generation=3)
    result = plan(
        down, observe(down, in_gang(workers(down, 3), "job-gang-0"), (workload("job-gang-0", 2),)), NOW, CONFIG
    )
    assert deleted(result) == ["job-worker-2"] and created(result) == []


def preempted(pods: list[PodView], role: str, index: int) -> list[PodView]:
    """The pods, with `role` `index` marked by the scheduler for preemption (still running)."""
    return [
        PodView(**{**p.__dict__, "disruption_reason": "PreemptionByScheduler"})
        if (p.role, p.index) == (role, index)
        else p
        for p in pods
    ]


def test_a_preempted_elastic_worker_is_replaced_alone_into_the_running_gang() -> None:
    job = elastic_job(workers=3)
    gangs = (workload("job-gang-0", 2),)
    result = plan(job, observe(job, preempted(in_gang(workers(job, 3), "job-gang-0"), "worker", 2), gangs), NOW, CONFIG)
    assert deleted(result) == ["job-worker-2"], "the gang is not released: torchrun goes on with 2"
    status = stored(result)
    assert (status["disruptionCount"], status.get("restartCount", 0), status["attempt"]) == (1, 0, 1)
    after = make_job(status, workers=3, framework="pytorch", elastic={"minWorkers": 2, "maxWorkers": 4})
    survivors = in_gang(workers(job, 2), "job-gang-0")
    [replacement] = manifests(plan(after, observe(after, survivors, gangs), NOW, CONFIG), "Pod")
    assert replacement["metadata"]["name"] == "job-worker-2"
    assert replacement["spec"]["workloadRef"]["name"] == "job-gang-0"


def test_a_preempted_elastic_worker_0_releases_the_whole_gang() -> None:
    job = elastic_job(workers=3)
    pods = preempted(in_gang(workers(job, 3), "job-gang-0"), "worker", 0)
    result = plan(job, observe(job, pods, (workload("job-gang-0", 2),)), NOW, CONFIG)
    assert deleted(result) == ["job-worker-0", "job-worker-1", "job-worker-2"]
    assert stored(result)["disruptionCount"] == 1 and stored(result).get("restartCount", 0) == 0


def test_a_preempted_parameter_server_restarts_every_role_and_an_evaluator_goes_alone() -> None:
    job = ps_job({"phase": "Running", "attempt": 0, **STARTED})
    pods = in_gang([pod(job, r.role, r.index) for r in desired_replicas(job.spec)], "job-gang-0")
    gangs = (workload("job-gang-0", 6),)
    result = plan(job, observe(job, preempted(pods, "ps", 1), gangs), NOW, CONFIG)
    assert sorted(deleted(result)) == sorted(p.name for p in pods)
    assert stored(result)["disruptionCount"] == 1 and stored(result).get("restartCount", 0) == 0
    [event] = [e for e in result.events if e.reason == "Restarting"]
    assert "ps 1 (pod job-ps-1) was preempted by the scheduler" in event.message
    result = plan(job, observe(job, preempted(pods, "evaluator", 0), gangs), NOW, CONFIG)
    assert deleted(result) == ["job-evaluator-0"]


def cpu_quota(hard: str, used: str) -> NamespaceQuotas:
    body = {
        "metadata": {"name": "cpu"},
        "spec": {"hard": {"requests.cpu": hard}},
        "status": {"used": {"requests.cpu": used}},
    }
    return NamespaceQuotas((body,))


def test_the_quota_gate_counts_each_role_s_own_requests() -> None:
    roles = {**PS_ROLES, "ps": {"replicas": 2, "resources": {"requests": {"cpu": "2"}}}}
    job = make_job(roles=roles, resources={"requests": {"cpu": "1"}})  # 4 pods at 1 CPU, 2 at 2 CPUs: 8
    fits = plan(job, observe(job, [], (workload("job-gang-0", 6),), quotas=cpu_quota("8", "0")), NOW, CONFIG)
    assert len(manifests(fits, "Pod")) == 6
    full = plan(job, observe(job, [], (workload("job-gang-0", 6),), quotas=cpu_quota("8", "1")), NOW, CONFIG)
    assert not manifests(full, "Pod")
    blocked = next(c for c in stored(full)["conditions"] if c["type"] == "Blocked")
    assert blocked["reason"] == "QuotaExceeded"
    assert "7 of 8 requests.cpu free now and the gang needs 8" in blocked["message"]


def test_a_job_missing_only_a_role_pod_still_takes_its_quota_turn() -> None:
    job = ps_job({"phase": "Running", **STARTED})
    live = [pod(job, r.role, r.index) for r in desired_replicas(job.spec) if r.role != "ps"]
    assert creates_workers(job, observe(job, live))
    assert not creates_workers(job, observe(job, [pod(job, r.role, r.index) for r in desired_replicas(job.spec)]))


def test_admission_refuses_a_role_gang_no_quota_can_hold() -> None:
    roles = {"chief": {}, "ps": {"replicas": 2, "resources": {"requests": {"cpu": "4"}}}}
    spec = {"framework": "tensorflow", "image": "img", "command": ["t"], "workers": 2, "roles": roles}
    spec["resources"] = {"requests": {"cpu": "1"}}
    cluster = Cluster(quotas=[quota("cpu", {"requests.cpu": "10"})])
    verdict = asyncio.run(validate(request(spec, version=k.V1ALPHA1), cluster, CONFIG, None))
    assert not verdict.allowed  # a chief and 2 workers at 1 CPU, 2 parameter servers at 4: 11
    assert "the gang of 5 pods needs 11: it could never start" in verdict.message
