"""Facts from around a job, reduced from API objects; the cached lookups that fetch them; the preflight's words;
and what the reconciler learns from admission.

Proves: a namespace is `restricted` only by its enforce label; a node's readiness (Ready, NotReady, Unknown, no
condition, deleted) and whether its kubelet is lost; a PVC's phase and age; pod_view reads the waiting reason
(ignoring ContainerCreating) and the deletion timestamp; the TTL cache fetches a key once while fresh, shares one
fetch between concurrent callers, refetches after the TTL and stays bounded; the preflight tells a missing
namespace from missing RBAC; the reconciler counts refusals until a create succeeds and learns `restricted` from a
PodSecurity refusal of a pod built without runAsNonRoot.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.test_apply import FakeClock
from tests.unit.test_planner import make_job
from trainingjob.api.times import parse_time
from trainingjob.config import OperatorConfig
from trainingjob.kube.ttl_cache import TtlCache
from trainingjob.operator.lookups import Lookups
from trainingjob.operator.preflight import explain
from trainingjob.operator.trainingjob.apply import ApplyResult
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.reconcile.observed import ObservedChildren, pod_view
from trainingjob.reconcile.surroundings import Refusal, claim_view, enforces_restricted, node_view

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("labels", "restricted"),
    [
        ({"pod-security.kubernetes.io/enforce": "restricted"}, True),
        ({"pod-security.kubernetes.io/enforce": "baseline"}, False),
        ({"pod-security.kubernetes.io/warn": "restricted"}, False),
        ({}, False),
    ],
)
def test_only_the_enforce_label_makes_a_namespace_restricted(labels: dict, restricted: bool) -> None:
    assert enforces_restricted({"metadata": {"name": "ns", "labels": labels}}) is restricted
    assert enforces_restricted(None) is False


def node(status: str | None) -> dict[str, Any]:
    conditions = (
        [] if status is None else [{"type": "Ready", "status": status, "reason": "R", "lastTransitionTime": "T"}]
    )
    return {"metadata": {"name": "n"}, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("body", "ready", "lost", "words"),
    [
        (node("True"), "True", False, "is Ready"),
        (node("False"), "False", True, "is NotReady (R) since T"),
        (node("Unknown"), "Unknown", True, "unreachable"),
        (node(None), "Unknown", True, "unreachable"),
        (None, "Missing", True, "no longer exists"),
    ],
)
def test_a_node_is_lost_unless_it_is_ready(body: dict | None, ready: str, lost: bool, words: str) -> None:
    view = node_view("n", body)
    assert (view.ready, view.lost) == (ready, lost)
    assert words in view.describe()


def test_claim_and_pod_views() -> None:
    created = "2026-11-22T12:00:00Z"
    claim = claim_view({"metadata": {"name": "c", "creationTimestamp": created}, "status": {"phase": "Pending"}})
    assert (claim.name, claim.phase, claim.created) == ("c", "Pending", parse_time(created))
    waiting = {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off"}}}
    creating = {"state": {"waiting": {"reason": "ContainerCreating"}}}
    body = {
        "metadata": {"name": "p", "labels": {}, "deletionTimestamp": created},
        "status": {"phase": "Pending", "containerStatuses": [creating, waiting]},
    }
    view = pod_view(body)
    assert (view.waiting_reason, view.waiting_message, view.deletion_timestamp) == (
        "ImagePullBackOff",
        "Back-off",
        parse_time(created),
    )
    assert pod_view({"metadata": {}, "status": {"containerStatuses": [creating]}}).waiting_reason is None


def test_the_ttl_cache_fetches_once_while_fresh_and_once_for_concurrent_callers() -> None:
    fetched: list[str] = []
    clock = FakeClock()

    async def fetch(key: str) -> str:
        fetched.append(key)
        await asyncio.sleep(0.01)
        return key.upper()

    async def scenario() -> list[str]:
        cache = TtlCache(fetch, ttl=10, max_entries=2, clock=clock)
        answers = await asyncio.gather(*(cache.get("a") for _ in range(5)))
        answers.append(await cache.get("a"))
        clock.now += 11
        answers.append(await cache.get("a"))
        await cache.get("b")
        await cache.get("c")
        assert len(cache.entries) == 2
        return answers

    assert asyncio.run(scenario()) == ["A"] * 7
    assert fetched == ["a", "a", "b", "c"]


class Response:
    def __init__(self, status: int, body: dict | None) -> None:
        self.status, self.body = status, body

    async def read(self) -> bytes:
        return json.dumps(self.body or {}).encode()


class FakeCore:
    """What Lookups calls on a CoreV1Api: read_namespace and read_node, answering from dicts (None: 404)."""

    def __init__(self, namespaces: dict[str, Any], nodes: dict[str, Any]) -> None:
        self.namespaces, self.nodes, self.calls = namespaces, nodes, 0

    async def read_namespace(self, name: str, **_: Any) -> Response:
        self.calls += 1
        if name == "forbidden":
            return Response(403, None)
        body = self.namespaces.get(name)
        return Response(200 if body else 404, body)

    async def read_node(self, name: str, **_: Any) -> Response:
        self.calls += 1
        body = self.nodes.get(name)
        return Response(200 if body else 404, body)


def test_lookups_read_namespaces_and_nodes_and_learn_from_admission() -> None:
    restricted = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    core = FakeCore({"strict": restricted, "open": {"metadata": {}}}, {"n1": node("False")})

    async def scenario() -> tuple[Any, ...]:
        lookups = Lookups(core)
        answers = [await lookups.namespace_restricted(n) for n in ("strict", "open", "forbidden", "strict")]
        lookups.learn_restricted("open")
        learnt = await lookups.namespace_restricted("open")
        nodes = await lookups.node_views(["n1", "gone", "n1"])
        return answers, learnt, nodes

    answers, learnt, nodes = asyncio.run(scenario())
    assert answers == [True, False, False, True] and learnt is True
    assert (nodes["n1"].ready, nodes["gone"].ready) == ("False", "Missing")
    assert core.calls == 5, "each namespace and node read once"


def api_error(status: int, message: str) -> ApiException:
    error = ApiException(status=status, reason="x")
    error.body = json.dumps({"message": message})
    return error


def test_the_preflight_tells_a_missing_namespace_from_missing_rbac() -> None:
    missing = explain(api_error(404, 'namespaces "tjs" not found'), "tjs", "Lease")
    assert str(missing).startswith("namespace tjs does not exist (the operator keeps its Lease there): apply deploy/")
    forbidden = explain(api_error(403, "leases is forbidden"), "tjs", "Lease")
    assert "may not create Leases in namespace tjs (leases is forbidden): apply deploy/rbac" in str(forbidden)
    assert explain(api_error(409, "exists"), "tjs", "Lease") is None


class LearningLookups:
    def __init__(self) -> None:
        self.learnt: list[str] = []

    def learn_restricted(self, namespace: str) -> None:
        self.learnt.append(namespace)


def test_the_reconciler_counts_refusals_and_learns_restricted_from_pod_security() -> None:
    asyncio.run(counts_refusals_and_learns_restricted())


async def counts_refusals_and_learns_restricted() -> None:
    """Async only for the work queue's timers: a refusal requeues the job after a backoff, never at once."""
    lookups = LearningLookups()
    reconciler = Reconciler({}, None, OperatorConfig(), lookups=lookups)  # type: ignore[arg-type]
    job, key = make_job(), ("ns", "job")
    relaxed = ObservedChildren(namespace_restricted=False)
    for _ in range(2):
        refused = ApplyResult(denials=[Refusal("Pod", "job-worker-1", "quota")])
        reconciler.remember_admission(key, job, relaxed, refused, NOW)
    denial = reconciler.memory[key].denial
    assert denial is not None and denial.count == 2 and denial.messages == ("Pod job-worker-1: quota",)
    assert len(reconciler.queue) == 0 and reconciler.queue.timers == 1, "requeued later, not now"
    reconciler.remember_admission(key, job, relaxed, ApplyResult(created=1), NOW)
    assert reconciler.memory[key].denial is None
    refused = 'Pod job-worker-0 was rejected: pods "job-worker-0" is forbidden: violates PodSecurity "restricted"'
    reconciler.remembered(key).rejections = [refused]
    reconciler.remember_admission(key, job, relaxed, ApplyResult(rejections=[refused]), NOW)
    assert lookups.learnt == ["ns"] and not reconciler.memory[key].rejections, "retried with runAsNonRoot, not failed"
    own = make_job(securityContext={"runAsUser": 0})
    reconciler.remembered(key).rejections = [refused]
    reconciler.remember_admission(key, own, relaxed, ApplyResult(rejections=[refused]), NOW)
    assert reconciler.memory[key].rejections == [refused], "the user's own securityContext: InvalidSpec as before"
