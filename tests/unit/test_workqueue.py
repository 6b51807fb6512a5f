"""WorkQueue semantics (client-go style), driven on a real event loop with `asyncio.run`.

Proves: a key is queued at most once however often it is added; a key added while it is being processed is not
handed out again until `done`, and then exactly once; `add_after` keeps one timer per key that fires once (the sooner
of two deadlines wins, `forget` cancels it); and the timer count returns to 0, so it does not grow with the
number of events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from trainingjob.operator.runtime.queue import WorkQueue

KEY = ("ml", "mnist")
NOTHING = 0.05  # long enough for a wrongly queued key to be handed out
PATIENCE = 2.0  # upper bound for something that must happen


async def next_key(queue: WorkQueue, within: float = PATIENCE) -> Hashable:
    return await asyncio.wait_for(queue.get(), within)


async def nothing_queued(queue: WorkQueue) -> bool:
    try:
        await asyncio.wait_for(queue.get(), NOTHING)
    except TimeoutError:
        return True
    return False


@pytest.mark.parametrize("times", [1, 2, 5])
def test_a_key_added_repeatedly_is_queued_once(times: int) -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for _ in range(times):
            queue.add(KEY)
        assert len(queue) == 1
        assert await next_key(queue) == KEY
        assert len(queue) == 0
        assert await nothing_queued(queue)

    asyncio.run(scenario())


def test_distinct_keys_come_out_in_order() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for key in ("a", "b", "a", "c", "b"):
            queue.add(key)
        assert len(queue) == 3
        assert [await next_key(queue) for _ in range(3)] == ["a", "b", "c"]

    asyncio.run(scenario())


@pytest.mark.parametrize("adds_while_processing", [1, 3])
def test_a_key_added_while_processing_runs_once_more_after_done(adds_while_processing: int) -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(KEY)
        assert await next_key(queue) == KEY
        for _ in range(adds_while_processing):
            queue.add(KEY)
        assert len(queue) == 0, "never handed out while it is being processed"
        assert await nothing_queued(queue)
        queue.done(KEY)
        assert len(queue) == 1
        assert await next_key(queue) == KEY
        queue.done(KEY)
        assert len(queue) == 0
        assert await nothing_queued(queue)

    asyncio.run(scenario())


def test_done_without_new_events_does_not_requeue() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(KEY)
        await next_key(queue)
        queue.done(KEY)
        assert len(queue) == 0
        assert await nothing_queued(queue)

    asyncio.run(scenario())


def test_other_keys_flow_while_one_is_processing() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add("a")
        assert await next_key(queue) == "a"
        queue.add("a")
        queue.add("b")
        assert await next_key(queue) == "b"
        queue.done("a")
        assert await next_key(queue) == "a"

    asyncio.run(scenario())


def test_add_after_fires_once() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after(KEY, 0.02)
        assert queue.timers == 1
        assert len(queue) == 0
        assert await next_key(queue) == KEY
        assert queue.timers == 0
        queue.done(KEY)
        await asyncio.sleep(0.1)
        assert len(queue) == 0
        assert await nothing_queued(queue)

    asyncio.run(scenario())


@pytest.mark.parametrize("delay", [0, -5])
def test_add_after_with_no_delay_fires_soon(delay: float) -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after(KEY, delay)
        assert await next_key(queue, within=0.5) == KEY
        assert queue.timers == 0

    asyncio.run(scenario())


def test_a_later_add_after_keeps_the_sooner_timer() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after(KEY, 0.05)
        queue.add_after(KEY, 3600)
        assert queue.timers == 1
        await asyncio.sleep(0.2)
        assert len(queue) == 1, "the sooner (0.05 s) deadline must still fire"
        assert await next_key(queue) == KEY
        assert queue.timers == 0
        queue.done(KEY)
        assert await nothing_queued(queue)

    asyncio.run(scenario())


def test_a_sooner_add_after_replaces_a_distant_timer() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after(KEY, 3600)
        queue.add_after(KEY, 0.01)
        assert await next_key(queue) == KEY
        assert queue.timers == 0, "the hour-long timer is gone, not just superseded"

    asyncio.run(scenario())


def test_forget_cancels_the_timer() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after(KEY, 0.02)
        queue.add_after("other", 0.02)
        queue.forget(KEY)
        assert queue.timers == 1
        assert await next_key(queue) == "other"
        await asyncio.sleep(0.05)
        assert len(queue) == 0
        assert await nothing_queued(queue)
        queue.forget(KEY)  # forgetting twice, or a key never timed, is harmless
        queue.forget("never")
        assert queue.timers == 0

    asyncio.run(scenario())


def test_timer_firing_while_processing_requeues_after_done() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(KEY)
        await next_key(queue)
        queue.add_after(KEY, 0.01)
        await asyncio.sleep(0.05)
        assert (queue.timers, len(queue)) == (0, 0)
        queue.done(KEY)
        assert await next_key(queue) == KEY

    asyncio.run(scenario())


def test_timer_firing_for_a_queued_key_does_not_duplicate_it() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(KEY)
        queue.add_after(KEY, 0.01)
        await asyncio.sleep(0.05)
        assert len(queue) == 1
        assert await next_key(queue) == KEY
        assert await nothing_queued(queue)

    asyncio.run(scenario())


def test_timers_do_not_grow_with_events() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for _ in range(200):  # a burst of deadline updates for one job
            queue.add_after(KEY, 0.01)
        assert queue.timers == 1
        keys = [("ml", f"job-{i}") for i in range(50)]
        for key in keys:
            queue.add_after(key, 0.01)
        assert queue.timers == 51
        handed_out = set()
        for _ in range(51):
            key = await next_key(queue)
            handed_out.add(key)
            queue.done(key)
        assert handed_out == {KEY, *keys}
        assert queue.timers == 0
        for _ in range(20):  # reconcile loops that re-arm a timer each time
            queue.add_after(KEY, 0)
            key = await next_key(queue)
            queue.done(key)
            assert queue.timers == 0
        assert len(queue) == 0

    asyncio.run(scenario())
