"""A framework's hooks are all the builders and the planner know of it: one registered in a test (as a new module
would be, with one line in frameworks/registry.py) adds a child, changes its pods and judges success, and nothing
else in the operator changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.unit.test_planner import CONFIG, NOW, children, make_job, pod, stored
from trainingjob.builders.pod import desired_worker_pod, framework_children
from trainingjob.frameworks import registry
from trainingjob.frameworks.base import Plugin, PodChanges, SuccessRule, WorkerContext
from trainingjob.planning.actions import CreateChild
from trainingjob.reconcile.planner import plan


class Toy(Plugin):
    """A made-up framework for this test: worker 0 decides, every pod mounts a token, each job gets a ConfigMap."""

    name = "toy"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        return {"TOY_RANK": str(context.index)}

    def children(self, context: WorkerContext) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{context.job_name}-toy"}, "data": {}}]

    def pod_changes(self, context: WorkerContext) -> PodChanges:
        volume = {"name": "toy", "emptyDir": {}}
        command = ("toy-agent",) if context.index > 0 else None
        return PodChanges((volume,), ({"name": "toy", "mountPath": "/toy"},), command)

    def success_rule(self, replicas: Mapping[str, int]) -> SuccessRule | None:
        return SuccessRule("worker", 0, "ToyDone", "worker 0 said so")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.FRAMEWORKS, "toy", Toy())


def test_a_framework_adds_children_made_the_jobs(toy: None) -> None:
    job = make_job(framework="toy")
    [child] = framework_children(job)
    assert child["metadata"]["name"] == "job-toy" and child["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    created = [a.name for a in plan(job, children(job), NOW, CONFIG).actions if isinstance(a, CreateChild)]
    assert created[-3:] == ["job-toy", "job-worker-0", "job-worker-1"], "created with the workers, before them"


def test_a_framework_changes_its_pods(toy: None) -> None:
    job = make_job(framework="toy")
    first, second = (desired_worker_pod(job, i, 0, CONFIG)["spec"] for i in (0, 1))
    assert [v["name"] for v in first["volumes"]][-1] == "toy" and first["containers"][0]["command"] == ["train"]
    assert second["containers"][0]["command"] == ["toy-agent"]
    assert {"name": "TOY_RANK", "value": "1"} in second["containers"][0]["env"]


def test_a_framework_judges_success(toy: None) -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}, framework="toy")
    result = plan(job, children(job, pod(job, 0, "Succeeded"), pod(job, 1)), NOW, CONFIG)
    succeeded = next(c for c in stored(result)["conditions"] if c["type"] == "Succeeded")
    assert (stored(result)["phase"], succeeded["reason"]) == ("Succeeded", "ToyDone")


def test_the_api_takes_each_role_from_its_framework() -> None:
    """spec.roles, its limits, the pods' order and the chief come from the frameworks' Role records: a framework's
    roles live in its module (frameworks/base.py: Role), not in the API's tables."""
    from tests.unit.schema_support import field
    from trainingjob.api import constants as k

    described = field("spec.roles")["properties"]
    for framework in registry.FRAMEWORKS.values():
        for role in framework.roles:
            assert k.FRAMEWORK_ROLES[role.name] == framework.name
            limit = 1 if role.single else k.MAX_WORKERS
            assert described[role.name]["description"] == f"{role.description} At most {limit}."
            assert described[role.name]["properties"]["replicas"]["maximum"] == limit
    assert list(described) == [role.name for role in k.EXTRA_ROLES]
    assert k.ROLES == ("chief", "launcher", "ps", "worker", "evaluator")
    assert k.CHIEF_ROLES == ("chief",)
