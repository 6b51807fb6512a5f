"""scheduling/discovery.py: which gang APIs a cluster serves, from its discovery documents; anything but a clear
answer counts as not served (the operator must start all the same)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.test_planner import make_job
from trainingjob.operator.trainingjob.quota_gate import creates_workers
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.scheduling.discovery import served_gang_apis, served_resources
from trainingjob.scheduling.gang import Coscheduling, NativePodGroup, NativeWorkload, Volcano


def fetcher(documents: dict[str, tuple[int, Any]], asked: list[str] | None = None):
    async def fetch(path: str) -> tuple[int, Any]:
        if asked is not None:
            asked.append(path)
        answer = documents.get(path, (404, None))
        if isinstance(answer, Exception):
            raise answer
        return answer

    return fetch


def resources(*names: str) -> dict[str, Any]:
    return {"kind": "APIResourceList", "resources": [{"name": name} for name in names]}


def test_a_1_35_cluster_with_the_gates_serves_the_workload_api_only() -> None:
    asked: list[str] = []
    documents = {"/apis/scheduling.k8s.io/v1alpha1": (200, resources("workloads"))}
    served = asyncio.run(served_gang_apis(fetcher(documents, asked)))
    assert served == frozenset({NativeWorkload.api})
    # One request per group version, however many of its resources are asked for.
    assert sorted(asked) == sorted(set(asked))


def test_each_api_is_served_only_when_its_group_version_lists_its_resource() -> None:
    documents = {
        "/apis/scheduling.k8s.io/v1alpha2": (200, resources("podgroups", "podgroups/status", "workloads")),
        "/apis/scheduling.x-k8s.io/v1alpha1": (200, resources("podgroups", "elasticquotas")),
        "/apis/scheduling.volcano.sh/v1beta1": (200, resources("queues")),
    }
    served = asyncio.run(served_gang_apis(fetcher(documents)))
    assert served == frozenset({NativePodGroup.api, Coscheduling.api})
    assert Volcano.api not in served


def test_failures_count_as_not_served() -> None:
    documents = {
        "/apis/scheduling.k8s.io/v1alpha1": (503, None),
        "/apis/scheduling.x-k8s.io/v1alpha1": ConnectionError("refused"),
    }
    assert asyncio.run(served_gang_apis(fetcher(documents))) == frozenset()


def test_subresources_are_not_resources() -> None:
    assert served_resources(resources("podgroups/status")) == set()
    assert served_resources(None) == set()


def test_only_a_running_job_short_of_workers_waits_for_a_quota_turn() -> None:
    job = make_job()  # 2 workers
    one = ObservedChildren(pods=(PodView("job-worker-0", 0, 0, "h", "Running"),))
    assert creates_workers(job, one)
    both = ObservedChildren(pods=tuple(PodView(f"job-worker-{i}", i, 0, "h", "Running") for i in (0, 1)))
    assert not creates_workers(job, both)
    assert not creates_workers(make_job(suspend=True), one)
    assert not creates_workers(make_job(status={"phase": "Succeeded"}), one)
