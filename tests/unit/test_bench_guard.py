"""The harness's watchdog: a dead watch, a watch that missed a change a LIST sees, or no change at all ends a wait
with what was seen, instead of an hour's silent timeout."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.guard import Stalled, Watchdog, missed_by_watch
from bench.observe import Timeline
from bench.run import wait_until


def pod(name: str, phase: str, job: str = "job-1", version: int = 1) -> dict[str, Any]:
    metadata = {"name": name, "labels": {"job": job}, "resourceVersion": str(version)}
    return {"metadata": metadata, "status": {"phase": phase}}


def timeline() -> Timeline:
    return Timeline(1, 2, lambda p: (p["metadata"].get("labels") or {}).get("job"))


def test_a_change_two_lists_agree_on_and_the_watch_lacks_is_missed() -> None:
    seen = {"pod/a": "Pending", "pod/b": "Running"}
    earlier = {"pod/a": ("Running", 5), "pod/b": ("Running", 6), "pod/c": ("Pending", 7)}
    listed = {"pod/a": ("Running", 5), "pod/b": ("Running", 6), "pod/c": ("Running", 9)}
    # a: both LISTs say Running, the watch still Pending: missed. c: changed between the LISTs: maybe just behind.
    assert missed_by_watch(earlier, listed, seen) == ["pod/a"]
    assert missed_by_watch({}, listed, seen) == []
    # A watch that has delivered version 10 should have seen a's version 5; one that reached only 4 is behind.
    assert missed_by_watch(earlier, listed, seen, {"pod": 10}) == ["pod/a"]
    assert missed_by_watch(earlier, listed, seen, {"pod": 4}) == [], "behind, not missed"


def test_listed_states_name_pods_and_jobs_as_the_watch_does() -> None:
    line = timeline()
    job = {"metadata": {"name": "job-1", "resourceVersion": "8"}, "status": {"phase": "Running"}}
    line.on_pod("ADDED", pod("w-0", "Running", version=7), jobs_from_pods=False)
    line.on_job(lambda o: o["status"]["phase"], "MODIFIED", job)
    listed = line.listed_states(
        [pod("w-0", "Running", version=7), pod("other", "Running", job=None)],  # type: ignore[arg-type]
        [job],
        lambda o: o["status"]["phase"],
    )
    assert listed == {"pod/w-0": ("Running", 7), "job/job-1": ("Running", 8)}
    assert line.seen_states() == {"pod/w-0": "Running", "job/job-1": "Running"}
    assert line.watched_versions == {"pod": 7, "job": 8}


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_broken_run_ends_the_wait_at_once_with_its_reason() -> None:
    dog = Watchdog(lambda: RuntimeError("the harness's watch stopped"), dict, dict)
    with pytest.raises(RuntimeError, match="watch stopped"):
        run(wait_until(lambda: False, 3600, lambda: None, dog))


def test_a_watch_that_missed_a_change_is_recorded_and_a_stall_ends_the_wait() -> None:
    line = timeline()
    line.on_pod("ADDED", pod("w-0", "Pending"), jobs_from_pods=False)

    async def listing() -> dict[str, tuple[str, int]]:
        return {"pod/w-0": ("Running", 1)}  # what the API server says; the watch never delivered it

    dog = Watchdog(lambda: None, line.seen_states, line.summary, listing, list_every_s=0.0, stall_s=0.5)
    dog.watched = lambda: {"pod": 2, "job": 0}  # the watch got past version 1 without delivering it
    with pytest.raises(Stalled, match="nothing changed") as stalled:
        run(wait_until(lambda: False, 3600, lambda: None, dog.expecting(line.progress)))
    assert stalled.value.seen["pods_seen"] == 1 and dog.lists >= 2
    assert dog.disagreements and "pod/w-0 listed ('Running', 1), seen Pending" in dog.disagreements[0]


def test_nothing_changing_for_the_stall_time_is_a_stall_where_change_is_expected() -> None:
    line = timeline()
    dog = Watchdog(lambda: None, line.seen_states, line.summary, stall_s=0.0)
    with pytest.raises(Stalled, match="nothing changed"):
        run(wait_until(lambda: False, 3600, lambda: None, dog.expecting(line.progress)))
    quiet = Watchdog(lambda: None, line.seen_states, line.summary, stall_s=0.0).expecting(None)
    assert run(wait_until(lambda: False, 1.5, lambda: None, quiet)) is False, "a wait for quiet is not a stall"


def test_progress_in_the_watch_keeps_a_wait_alive() -> None:
    line = timeline()
    dog = Watchdog(lambda: None, line.seen_states, line.summary, stall_s=3600).expecting(line.progress)
    ticks = iter(range(3))

    def tick() -> None:
        index = next(ticks, None)
        if index is not None:
            line.on_pod("ADDED", pod(f"w-{index}", "Running"), jobs_from_pods=False)

    assert run(wait_until(lambda: line.pod_events >= 3, 3600, tick, dog)) is True


def test_a_cross_check_list_the_server_does_not_answer_is_skipped_and_counted() -> None:
    from bench.client import ApiError

    async def listing() -> dict[str, tuple[str, int]]:
        raise ApiError(504, "Timeout: request did not complete within the allotted timeout")

    line = timeline()
    dog = Watchdog(lambda: None, line.seen_states, line.summary, listing, list_every_s=0.0)
    assert run(wait_until(lambda: False, 0.5, lambda: None, dog)) is False, "the wait ran its course"
    assert dog.failed_lists >= 1 and dog.lists == 0


def counting_listing(calls: list[float]) -> Any:
    async def listing() -> dict[str, tuple[str, int]]:
        calls.append(1.0)
        return {}

    return listing


def test_a_wait_that_does_not_cross_check_lists_nothing_and_the_next_wait_lists_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.run

    monkeypatch.setattr(bench.run, "SAMPLE_INTERVAL", 0.01)
    calls: list[float] = []
    line = timeline()
    dog = Watchdog(lambda: None, line.seen_states, line.summary, counting_listing(calls), list_every_s=0.0)
    assert run(wait_until(lambda: False, 0.3, lambda: None, dog.expecting(None, cross_check=False))) is False
    assert calls == []
    assert run(wait_until(lambda: False, 0.3, lambda: None, dog.expecting(None))) is False
    assert calls, "an ordinary wait cross-checks again"


class RestartingOperator:
    """Stands in for a contender across one kill -9: re-observed on the third look at its metrics."""

    pid = None

    def __init__(self) -> None:
        self.looks = 0
        self.events: list[str] = []

    def stop(self, hard: bool) -> None:
        self.events.append(f"stop hard={hard}")

    def start(self, cluster: object) -> None:
        self.events.append("start")

    def reobserved(self, jobs: int) -> bool:
        self.looks += 1
        return self.looks >= 3


def test_a_restarts_reobserve_is_timed_without_a_cross_check_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.run

    monkeypatch.setattr(bench.run, "SAMPLE_INTERVAL", 0.01)
    monkeypatch.setattr(bench.run, "SETTLE_AFTER_RESTART_S", 0.0)
    calls: list[float] = []
    line = timeline()
    dog = Watchdog(lambda: None, line.seen_states, line.summary, counting_listing(calls), list_every_s=0.0)
    who = RestartingOperator()
    restart = run(bench.run.kill_and_restart(None, who, 1, 60, dog))  # type: ignore[arg-type]
    assert who.events == ["stop hard=True", "start"] and who.looks == 3
    assert restart.reobserved and calls == [], "a LIST was awaited between two looks at the metrics"
