"""The node agent and the UI watch through the shared reflector (kube/reflector.py) into stores of their own: what a
re-list after a watch gap tells them, and how the UI's scope falls back when listing every namespace is forbidden.
The reflector's protocol handling itself is in test_informer.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from trainingjob.node.api.informer import Informer
from trainingjob.ui.history import History
from trainingjob.ui.store import JobStore
from trainingjob.ui.watcher import JobWatcher


def obj(namespace: str, name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": version, "uid": f"uid-{name}"}}


def test_the_node_informer_turns_a_relist_into_the_events_the_gap_hid() -> None:
    events: list[tuple[str, str]] = []
    informer = Informer(None, "/api/v1/pods", lambda kind, o: events.append((kind, o["metadata"]["name"])), "pods")  # type: ignore[arg-type]
    informer.replace({("ml", n): obj("ml", n, "1") for n in ("kept", "changed", "gone")})
    informer.apply("ADDED", obj("ml", "new", "2"))
    events.clear()
    informer.replace({("ml", "kept"): obj("ml", "kept", "1"), ("ml", "changed"): obj("ml", "changed", "5")})
    assert sorted(events) == [("DELETED", "gone"), ("DELETED", "new"), ("MODIFIED", "changed")]
    assert sorted(name for _, name in informer.store) == ["changed", "kept"]


def test_a_relist_of_one_namespace_leaves_the_other_namespaces_jobs_alone() -> None:
    store = JobStore(History(None))
    store.replace_all([obj("a", "x", "1"), obj("b", "y", "1")], None)
    store.replace_all([], ["a", "b"], "a")
    assert sorted(store.jobs) == [("b", "y")]


class Response:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, json.dumps(body).encode()

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


class ScriptedApiClient:
    """An ApiClient whose GETs answer by path: every namespace is forbidden, the fallback namespace lists one job,
    and watches stay open."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.listed = asyncio.Event()

    async def call_api(self, path: str, method: str, query_params: list, **_: Any) -> Response:
        self.paths.append(path)
        if dict(query_params).get("watch"):
            self.listed.set()
            await asyncio.Event().wait()
        if "/namespaces/" not in path:
            return Response(403, {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "not cluster-wide"})
        return Response(200, {"metadata": {"resourceVersion": "3"}, "items": [obj("team", "job", "3")]})


def test_the_ui_falls_back_to_its_namespace_when_every_namespace_is_forbidden() -> None:
    async def scenario() -> tuple[JobStore, list[str]]:
        api, store = ScriptedApiClient(), JobStore(History(None))
        task = asyncio.create_task(JobWatcher(api, store, None, "team").run())  # type: ignore[arg-type]
        await asyncio.wait_for(api.listed.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return store, api.paths

    store, paths = asyncio.run(scenario())
    assert paths[0].endswith("/trainingjobs") and "/namespaces/" not in paths[0] and "/namespaces/team/" in paths[1]
    assert store.fallback and store.scope == ["team"] and list(store.jobs) == [("team", "job")]
    assert store.synced and store.problem is None
