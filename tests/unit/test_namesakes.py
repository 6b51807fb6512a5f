"""A worker whose name a pod that is not its worker holds is reported (Blocked, PodNameTaken, one Warning Event)
instead of leaving the job Pending without a word; the operator reads the namesake only after AlreadyExists and
looks again with a backoff, since a relabelled pod's deletion sends no event. No server: planner calls, and the
operator's memory of taken names against a fake CoreV1Api."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.unit.test_blocked import PENDING, condition
from tests.unit.test_planner import CONFIG, NOW, children, make_job, pod, stored
from trainingjob.api import constants as k
from trainingjob.operator.runtime.writer import EXISTED
from trainingjob.operator.trainingjob.apply import Applier, ApplyResult
from trainingjob.operator.trainingjob.namesakes import Namesakes, TakenNames
from trainingjob.planning.actions import CreateChild
from trainingjob.reconcile.namesakes import namesake_holder
from trainingjob.reconcile.planner import plan

OURS = {k.LABEL_JOB_NAME: "job", k.LABEL_MANAGED_BY: k.MANAGED_BY}


def pod_body(labels: dict[str, str], owner: dict[str, Any] | None, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "job-worker-0", "namespace": "ns", "labels": labels}
    if owner is not None:
        metadata["ownerReferences"] = [{"controller": True, **owner}]
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-22T12:00:00Z"
    return {"metadata": metadata}


JOB_OWNER = {"kind": k.KIND, "name": "job", "uid": "uid-1"}


def test_the_jobs_own_pod_is_no_namesake() -> None:
    assert namesake_holder("job", "uid-1", pod_body(OURS, JOB_OWNER)) is None


def test_a_relabelled_worker_is_named_with_the_label_that_differs_and_how_to_free_the_name() -> None:
    holder = namesake_holder("job", "uid-1", pod_body({**OURS, k.LABEL_JOB_NAME: "debug"}, JOB_OWNER))
    assert holder == (
        f"its label {k.LABEL_JOB_NAME} is 'debug', not 'job'; the worker is created once it is gone "
        "(kubectl delete pod job-worker-0 -n ns)"
    )


def test_a_pod_of_another_owner_or_of_none_says_whose_it_is() -> None:
    other = namesake_holder("job", "uid-1", pod_body({}, {"kind": "ReplicaSet", "name": "web", "uid": "rs-1"}))
    assert other is not None and other.startswith("it belongs to ReplicaSet web (uid rs-1); it lacks label")
    assert "it lacks label app.kubernetes.io/managed-by" in other
    assert (namesake_holder("job", "uid-1", pod_body(OURS, None)) or "").startswith("it has no controller;")


def test_an_earlier_job_of_the_same_name_waits_for_garbage_collection() -> None:
    earlier = pod_body(OURS, {**JOB_OWNER, "uid": "uid-0"})
    assert namesake_holder("job", "uid-1", earlier) == (
        f"it belongs to an earlier {k.KIND} of this name (uid uid-0); garbage collection deletes it, then the "
        "worker is created"
    )
    going = namesake_holder("job", "uid-1", pod_body(OURS, {**JOB_OWNER, "uid": "uid-0"}, deleting=True))
    assert going is not None and going.endswith("it is being deleted, and the worker is created once it is gone")


def test_a_taken_worker_name_blocks_the_job_with_one_warning() -> None:
    job = make_job(PENDING)
    holder = "its label ml.example.com/job-name is 'debug', not 'job'; delete it"
    first = plan(job, children(job, pod(job, 1), taken_names={"job-worker-0": holder}), NOW, CONFIG)
    blocked = condition(first.status)
    assert (blocked["status"], blocked["reason"]) == ("True", "PodNameTaken")
    assert (
        blocked["message"] == f"worker 0 (pod job-worker-0) cannot be created: a pod of that name is not this "
        f"job's worker: {holder}"
    )
    assert stored(first)["message"].endswith(blocked["message"])
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "PodNameTaken")]
    assert "job-worker-0" in [a.name for a in first.actions if isinstance(a, CreateChild)], "still tried each time"
    again = plan(make_job(first.status), children(job, pod(job, 1), taken_names={"job-worker-0": holder}), NOW, CONFIG)
    assert again.events == [] and condition(again.status) == blocked


def test_a_name_of_a_worker_the_job_sees_is_not_reported() -> None:
    job = make_job(PENDING)
    result = plan(job, children(job, pod(job, 0), pod(job, 1), taken_names={"job-worker-0": "x"}), NOW, CONFIG)
    assert condition(result.status) is None or condition(result.status)["status"] == "False"


def test_a_create_that_met_already_exists_is_reported_to_the_namesakes() -> None:
    result = ApplyResult()
    Applier.account(CreateChild({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0"}}), EXISTED, result)
    assert (result.existed_pods, result.claimed_pods) == (["w-0"], [])


class PodReader:
    """CoreV1Api's read_namespaced_pod as `read_json` calls it: a raw response, here from a dict of bodies."""

    def __init__(self, bodies: dict[str, dict[str, Any]]) -> None:
        self.bodies = bodies
        self.reads: list[str] = []

    async def read_namespaced_pod(self, name: str, namespace: str, **_: Any) -> Any:
        self.reads.append(name)
        body = self.bodies.get(name)
        return FakeResponse(200 if body else 404, body or {"kind": "Status", "code": 404})


class FakeResponse:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body

    async def read(self) -> bytes:
        return json.dumps(self.body).encode()


def test_the_operator_remembers_taken_names_and_looks_again_with_backoff() -> None:
    async def scenario() -> None:
        relabelled = pod_body({**OURS, k.LABEL_JOB_NAME: "debug"}, JOB_OWNER)
        core = PodReader({"job-worker-0": relabelled})
        namesakes, job, names = Namesakes(core), make_job(PENDING), TakenNames()
        met = ApplyResult(existed_pods=["job-worker-0"], claimed_pods=["job-worker-1"])
        assert [await namesakes.settle(names, job, met) for _ in range(3)] == [2.0, 4.0, 8.0]
        assert "'debug'" in names.taken["job-worker-0"] and core.reads == ["job-worker-0"] * 3
        assert await namesakes.settle(names, job, ApplyResult()) == 8.0, "kept while the job tries nothing"
        del core.bodies["job-worker-0"]  # the person deleted it: the next create meets it no more, or reads 404
        assert await namesakes.settle(names, job, ApplyResult(claimed_pods=["job-worker-0"])) is None
        assert names.taken == {} and names.in_a_row == 0
        assert await namesakes.settle(names, job, met) is None and names.taken == {}, "404: nothing holds it"

    asyncio.run(scenario())


def test_a_namesake_that_is_the_jobs_own_pod_or_a_finished_job_schedules_nothing() -> None:
    async def scenario() -> None:
        core = PodReader({"job-worker-0": pod_body(OURS, JOB_OWNER)})
        namesakes, names = Namesakes(core), TakenNames()
        met = ApplyResult(existed_pods=["job-worker-0"])
        assert await namesakes.settle(names, make_job(PENDING), met) is None, "the cache lags: its event comes"
        core.bodies["job-worker-0"] = pod_body({}, None)
        assert await namesakes.settle(names, make_job(PENDING), met) == 2.0
        assert await namesakes.settle(names, make_job({"phase": "Failed"}), ApplyResult()) is None
        assert names.taken == {}

    asyncio.run(scenario())
