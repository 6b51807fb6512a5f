"""The informer (kube/reflector.py feeding operator/runtime/store.py) against scripted HTTP responses: paged LIST,
watch events and bookmarks, 410 → re-list whose diff deletes what vanished during the gap, backoff after errors, and the
caches-synced barrier. What it does against a real API server is in tests/integration/test_watch_gaps.py."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest

from trainingjob.kube import reflector as reflector_module
from trainingjob.kube.backoff import watch_backoff
from trainingjob.kube.reflector import ApiClientTransport, Reflector, Resource, collector_paused, lines
from trainingjob.operator.runtime.controller import Controller, Registration
from trainingjob.operator.runtime.informers import Caches, Watch
from trainingjob.operator.runtime.manager import Manager
from trainingjob.operator.runtime.store import Index, ResourceStore, Touched
from trainingjob.operator.trainingjob.watches import worker_pod

PODS = Resource("", "v1", "pods")
JOBS = Resource("ml.example.com", "v1alpha1", "trainingjobs", "TrainingJob")
MODELS = Resource("ai.example.com", "v1", "llmmodels", "LLMModel")
JOB_LABEL = "ml.example.com/job-name"


def pod(name: str, version: str, phase: str = "Running") -> dict[str, Any]:
    labels = {JOB_LABEL: name.split("-worker-")[0]}
    return {"metadata": {"name": name, "namespace": "ml", "resourceVersion": version, "labels": labels},
            "status": {"phase": phase}}  # fmt: skip


class Content:
    """A streamed body, handed out in the chunks given (one event may span chunks, a chunk hold several)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def readany(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


class Response:
    def __init__(self, status: int, body: Any = None, events: list[dict[str, Any]] | None = None) -> None:
        self.status = status
        self.body = json.dumps(body).encode()
        self.content = Content([json.dumps(e).encode() + b"\n" for e in events or []])

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


class ScriptedApi:
    """Answers each GET with the next scripted response for its kind (list or watch); records the queries."""

    def __init__(self, lists: list[Response], watches: list[Response]) -> None:
        self.lists, self.watches = lists, watches
        self.queries: list[dict[str, str]] = []
        self.exhausted = asyncio.Event()

    async def call_api(self, path: str, method: str, query_params: list, **_: Any) -> Response:
        params = dict(query_params)
        self.queries.append(params)
        script = self.watches if params.get("watch") else self.lists
        if not script:
            self.exhausted.set()
            await asyncio.Event().wait()  # as a watch that stays open
        return script.pop(0)


def listing(pods: list[dict[str, Any]], version: str, token: str = "") -> Response:
    return Response(200, {"metadata": {"resourceVersion": version, "continue": token}, "items": pods})


def make_informer(api: ScriptedApi, changes: list[Touched]) -> tuple[Reflector, Index]:
    index = Index()
    store = ResourceStore({"worker_pods": index}, {"worker_pods": worker_pod}, on_change=changes.append)
    reflector = Reflector(
        ApiClientTransport(api), PODS.path("ml"), store, "pods", label_selector="app=x", page_size=2,
        not_served_is_empty=True,
    )  # fmt: skip
    return reflector, index


async def run_until_exhausted(informer: Reflector, api: ScriptedApi) -> None:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(api.exhausted.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def names(index: Index) -> list[str]:
    return sorted(view.name for views in index.values() for view in views)


def test_a_paged_list_fills_the_store_then_the_watch_resumes_from_the_listing() -> None:
    api = ScriptedApi(
        lists=[
            listing([pod("a-worker-0", "5"), pod("a-worker-1", "6")], "7", "next"),
            listing([pod("b-worker-0", "8")], "9"),
        ],
        watches=[],
    )
    changes: list[Touched] = []
    informer, index = make_informer(api, changes)
    asyncio.run(run_until_exhausted(informer, api))
    assert informer.synced.is_set() and names(index) == ["a-worker-0", "a-worker-1", "b-worker-0"]
    assert api.queries[1]["continue"] == "next" and api.queries[0]["limit"] == "2"
    assert api.queries[2]["watch"] == "true" and api.queries[2]["resourceVersion"] == "9"
    assert api.queries[2]["allowWatchBookmarks"] == "true" and api.queries[2]["labelSelector"] == "app=x"


def test_watch_events_update_the_store_and_bookmarks_move_the_resource_version() -> None:
    events = [
        {"type": "ADDED", "object": pod("a-worker-0", "11")},
        {"type": "MODIFIED", "object": pod("a-worker-0", "12", phase="Failed")},
        {"type": "ADDED", "object": pod("a-worker-1", "13")},
        {"type": "DELETED", "object": pod("a-worker-1", "14")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
    ]
    api = ScriptedApi(lists=[listing([], "10")], watches=[Response(200, events=events)])
    changes: list[Touched] = []
    informer, index = make_informer(api, changes)
    asyncio.run(run_until_exhausted(informer, api))
    assert [v.phase for v in index[("ml", "a")]] == ["Failed"]
    assert len(changes) == 4  # the bookmark touched nothing
    assert api.queries[-1]["resourceVersion"] == "20"  # the watch ended; it resumed from the bookmark


def test_gone_relists_and_the_diff_deletes_what_vanished_during_the_gap() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    api = ScriptedApi(
        lists=[listing([pod("a-worker-0", "5"), pod("a-worker-1", "6")], "7"), listing([pod("a-worker-0", "5")], "30")],
        watches=[Response(200, events=[gone])],
    )  # fmt: skip
    changes: list[Touched] = []
    informer, index = make_informer(api, changes)
    asyncio.run(run_until_exhausted(informer, api))
    assert names(index) == ["a-worker-0"] and informer.relists == 1
    assert changes[-1] == [("worker_pods", ("ml", "a"))]
    assert api.queries[-1]["resourceVersion"] == "30"


def test_errors_back_off_and_retry_without_ending_the_informer(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []

    async def no_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(reflector_module.asyncio, "sleep", no_sleep)
    api = ScriptedApi(
        lists=[Response(500, {"message": "etcdserver: leader changed"}), Response(410, {}), listing([], "3")],
        watches=[Response(503, {"message": "unavailable"})],
    )
    informer, _ = make_informer(api, [])
    asyncio.run(run_until_exhausted(informer, api))
    assert informer.synced.is_set()
    assert len(sleeps) == 2  # after the 500 and the 503; a 410 on a list just lists again
    assert sleeps[1] < 1.5  # the successful list in between reset the backoff
    assert informer.failures == 1


def test_backoff_doubles_to_thirty_seconds_with_jitter() -> None:
    assert [watch_backoff(n, rand=lambda: 0.5) for n in (1, 2, 3, 6, 9)] == [1.0, 2.0, 4.0, 30.0, 30.0]
    assert watch_backoff(1, rand=lambda: 0.0) == pytest.approx(0.8)
    assert watch_backoff(1, rand=lambda: 1.0) == pytest.approx(1.2)


def test_watch_lines_are_whole_events_however_the_stream_is_cut() -> None:
    """An event split across chunks, several in one chunk, one longer than aiohttp's readline allows (128 KiB: a
    job with a large status), and a last line without its newline."""
    big = b'{"x": "' + b"y" * 300_000 + b'"}'
    chunks = [b'{"a":', b' 1}\n\n{"b": 2}\n' + big[:1000], big[1000:] + b"\n", b'{"c": 3}']

    async def read() -> list[bytes]:
        return [line async for line in lines(Content(list(chunks)))]

    assert asyncio.run(read()) == [b'{"a": 1}', b'{"b": 2}', big, b'{"c": 3}']


def test_no_reconcile_runs_before_every_informer_has_listed() -> None:
    """The barrier that stopped a restarted leader from planning jobs whose pods it had not listed yet."""

    async def scenario() -> tuple[list[tuple], list[tuple]]:
        pods_listed = asyncio.Event()

        class SlowPods(ScriptedApi):
            async def call_api(self, path: str, method: str, query_params: list, **kwargs: Any) -> Response:
                if path.endswith("/pods") and not dict(query_params).get("watch"):
                    await pods_listed.wait()
                return await super().call_api(path, method, query_params, **kwargs)

        body = {"metadata": {"name": "a", "namespace": "ml", "resourceVersion": "1"}, "spec": {}}
        api = SlowPods(lists=[listing([body], "1"), listing([pod("a-worker-0", "2")], "2")], watches=[])
        job_watch = Watch(JOBS, "", {"trainingjob_bodies": lambda b: (("ml", b["metadata"]["name"]), b)})
        registration = Registration(
            JOBS, "trainingjob_bodies", (job_watch, Watch(PODS, "", {"worker_pods": worker_pod}))
        )
        caches = Caches(api, registration.owns, ["ml"], watch_timeout=60)
        seen: list[tuple] = []

        async def reconcile(key: tuple) -> None:
            seen.append((key, len(list(caches.indexes["worker_pods"].get(("ml", "a"), [])))))

        manager = Manager(caches, [Controller(registration, reconcile, workers=2)])
        caches.start()
        manager.start()
        await asyncio.sleep(0.1)
        before = list(seen)
        pods_listed.set()
        await manager.open_barrier()
        await asyncio.sleep(0.1)
        await manager.stop()
        await caches.stop()
        return before, seen

    before, after = asyncio.run(scenario())
    assert before == []  # the job was listed and queued, but nothing planned without its pods
    assert after == [(("ml", "a"), 1)]  # one reconcile, coalesced, seeing its pod


def test_resync_replans_every_cached_job_and_model_without_events() -> None:
    """Each controller (TrainingJobs, LLMModels) replans every object of its kind each period on its own."""

    async def scenario() -> list[tuple]:
        jobs, models = Index(), Index()
        jobs.put(("ml", "a"), ("ml", "a"), {}), jobs.put(("ml", "b"), ("ml", "b"), {})
        models.put(("ml", "m"), ("ml", "m"), {})
        seen: list[tuple] = []
        controllers = [
            Controller(
                Registration(kind, primary, ()), lambda key, kind=kind: _record(seen, (kind.kind, *key)), 1, 0.05
            )
            for kind, primary in ((JOBS, "trainingjob_bodies"), (MODELS, "llmmodel_bodies"))
        ]
        for controller in controllers:
            controller.indexes = {"trainingjob_bodies": jobs, "llmmodel_bodies": models}
            controller.synced.set()
            controller.start()
        for _ in range(100):
            if len(seen) >= 6:
                break
            await asyncio.sleep(0.02)
        await asyncio.gather(*(controller.stop() for controller in controllers))
        return seen

    seen = asyncio.run(scenario())
    assert {("TrainingJob", "ml", "a"), ("TrainingJob", "ml", "b"), ("LLMModel", "ml", "m")} <= set(seen)
    assert seen.count(("TrainingJob", "ml", "a")) >= 2  # again each period, with no event in between


async def _record(seen: list[tuple], key: tuple) -> None:
    seen.append(key)


def test_a_resource_not_served_counts_as_empty_and_is_listed_once_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LLMModel CRD missing must not hold every TrainingJob behind the caches-synced barrier."""

    async def no_sleep(seconds: float) -> None:
        pass

    monkeypatch.setattr(reflector_module.asyncio, "sleep", no_sleep)
    missing = Response(404, {"message": "the server could not find the requested resource"})
    api = ScriptedApi(lists=[missing], watches=[])
    informer, index = make_informer(api, [])
    asyncio.run(run_until_exhausted(informer, api))
    assert informer.synced.is_set() and names(index) == []  # synced while still not served
    api = ScriptedApi(lists=[missing, missing, listing([pod("a-worker-0", "5")], "5")], watches=[])
    informer, index = make_informer(api, [])
    asyncio.run(run_until_exhausted(informer, api))
    assert names(index) == ["a-worker-0"]


def test_a_resource_not_served_is_an_answer_not_a_stalled_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """/healthz fails for informers silent past the bound: one whose CRD is missing (Kueue's, on a cluster without
    Kueue) hears 404 at every retry, which is the API server answering, not silence."""

    async def no_sleep(seconds: float) -> None:
        pass

    monkeypatch.setattr(reflector_module.asyncio, "sleep", no_sleep)
    missing = Response(404, {"message": "the server could not find the requested resource"})
    api = ScriptedApi(lists=[missing, missing], watches=[])
    informer, _ = make_informer(api, [])
    ticks = iter(range(100, 200))
    informer.clock, informer.last_contact = lambda: float(next(ticks)), 0.0
    asyncio.run(run_until_exhausted(informer, api))
    assert informer.last_contact >= 100


def test_an_informer_backing_off_on_purpose_is_not_silent_and_its_silence_restarts_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Liveness bounds the time an informer waits for the API server; a backoff of up to 30 s after a refusal (403
    while a restarted API server syncs its RBAC caches, 429 while it re-initializes its storage) is not waiting."""
    now = [100.0]
    seen: list[tuple[bool, float]] = []

    async def sleep(seconds: float) -> None:
        seen.append((informer.backing_off, informer.silent_seconds(now[0] + seconds)))
        now[0] += seconds

    monkeypatch.setattr(reflector_module.asyncio, "sleep", sleep)
    api = ScriptedApi(lists=[Response(429, {"message": "storage is (re)initializing"})], watches=[])
    informer, _ = make_informer(api, [])
    informer.clock, informer.last_contact = (lambda: now[0]), 100.0
    asyncio.run(run_until_exhausted(informer, api))
    [(backing_off, silent_while_asleep)] = seen
    assert backing_off and silent_while_asleep == 0.0
    assert not informer.backing_off and informer.last_contact == now[0] > 100.0  # silence counts from the wake-up
    assert informer.silent_seconds(now[0] + 12) == 12


def test_pages_are_filed_with_the_collector_paused_and_the_collector_comes_back() -> None:
    """Filing a page allocates ~10^6 containers that live until it is filed: the cyclic collector, run over them
    again and again, was half the CPU of a restart's listing. It is off while a page is filed, and only then."""
    collector_on: list[bool] = []

    def record(body: Any) -> None:
        collector_on.append(gc.isenabled())  # and file nothing

    api = ScriptedApi(lists=[listing([pod("a-worker-0", "5")], "7", "next"), listing([pod("b-worker-0", "8")], "9")],
                      watches=[])  # fmt: skip
    store = ResourceStore({"worker_pods": Index()}, {"worker_pods": record})  # type: ignore[dict-item]
    informer = Reflector(ApiClientTransport(api), PODS.path("ml"), store, "pods", page_size=1)
    assert asyncio.run(informer.list()) == "9"
    assert collector_on == [False, False] and gc.isenabled()


def test_the_collector_is_never_left_off() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a page that does not parse")
    assert gc.isenabled(), "an error inside turns it back on"
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled(), "nested: only the outermost pause turns it back on"
    finally:
        gc.enable()
