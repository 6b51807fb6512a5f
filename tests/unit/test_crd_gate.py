"""The CRD gate (kube/crd_gate.py) against scripted HTTP responses: a resource not served waits on a watch of its
CRD, lists again as soon as the CRD serves it, and never lists in a loop while it waits; a CRD already served (yet
the resource 404s) or a gate refused (403) falls back to the backoff."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.test_informer import Response, ScriptedApi, listing
from trainingjob.kube.crd_gate import serves, wait_served
from trainingjob.kube.reflector import ApiClientTransport, Reflector, Resource
from trainingjob.operator.runtime.store import Index, ResourceStore

FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor")


def crd(version: str = "v1beta2", established: bool = True, served: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "resourceflavors.kueue.x-k8s.io", "resourceVersion": "3"},
        "spec": {"versions": [{"name": version, "served": served}]},
        "status": {"conditions": [{"type": "Established", "status": "True" if established else "False"}]},
    }


def test_a_crd_serves_a_version_once_established_and_served() -> None:
    assert serves(crd(), "v1beta2")
    assert not serves(crd(established=False), "v1beta2")
    assert not serves(crd(served=False), "v1beta2")
    assert not serves(crd(version="v1beta1"), "v1beta2")
    assert not serves({}, "v1beta2")


def test_the_gate_waits_for_the_crd_to_appear_and_be_established() -> None:
    events = [{"type": "ADDED", "object": crd(established=False)}, {"type": "MODIFIED", "object": crd()}]
    api = ScriptedApi(lists=[listing([], "2")], watches=[Response(200, events=events)])
    waited = asyncio.run(asyncio.wait_for(wait_served(ApiClientTransport(api), FLAVORS), 5))
    assert waited
    assert api.queries[0]["fieldSelector"] == "metadata.name=resourceflavors.kueue.x-k8s.io"


def test_a_crd_served_at_the_first_look_is_said_so_without_waiting() -> None:
    api = ScriptedApi(lists=[listing([crd()], "2")], watches=[])
    assert not asyncio.run(asyncio.wait_for(wait_served(ApiClientTransport(api), FLAVORS), 5))


def test_a_not_served_resource_is_listed_again_only_when_its_crd_appears() -> None:
    """404, then the gate (here: released by the test) says the CRD appeared: the next LIST follows at once; while
    the gate is shut, nothing is listed (the backoff of up to 30 s polled instead)."""
    api = ScriptedApi(lists=[Response(404, {"code": 404}), listing([], "5")], watches=[])
    opened = asyncio.Event()
    gate_calls: list[str] = []

    async def gate() -> bool:
        gate_calls.append("waiting")
        await opened.wait()
        return True

    async def scenario() -> None:
        store = ResourceStore({"flavors": Index()}, {})
        reflector = Reflector(ApiClientTransport(api), FLAVORS.path(None), store, "flavors", not_served_is_empty=True,
                              until_served=gate)  # fmt: skip
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), 5)  # the 404 counts as an empty listing
        await asyncio.sleep(0.1)
        assert len(api.queries) == 1 and gate_calls == ["waiting"]
        assert reflector.silent_seconds(reflector.clock() + 3600) == 0.0  # waiting on purpose is no stall
        opened.set()
        await asyncio.wait_for(api.exhausted.wait(), 5)  # listed again, then watched
        assert reflector.served
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert [q.get("watch") for q in api.queries] == [None, None, "true"]


def test_a_gate_refused_for_good_is_dropped_and_the_backoff_polls() -> None:
    api = ScriptedApi(lists=[Response(404, {"code": 404})], watches=[])

    async def refused() -> bool:
        from kubernetes_asyncio.client.exceptions import ApiException

        raise ApiException(status=403)

    async def scenario() -> Reflector:
        store = ResourceStore({"flavors": Index()}, {})
        reflector = Reflector(ApiClientTransport(api), FLAVORS.path(None), store, "flavors", not_served_is_empty=True,
                              until_served=refused)  # fmt: skip
        task = asyncio.create_task(reflector.run())
        await asyncio.wait_for(reflector.synced.wait(), 5)
        await asyncio.sleep(0.1)
        assert reflector.backing_off  # the old backoff, since the gate cannot be used
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return reflector

    assert asyncio.run(scenario()).until_served is None
