"""The startup barrier set (operator/toggles.py) behaves as Kopf's ToggleSet but wakes waiters only on flips."""

from __future__ import annotations

import asyncio

from kopf._cogs.aiokits import aiotoggles

from trainingjob.operator.toggles import CountedToggleSet


class CountingCondition(asyncio.Condition):
    def __init__(self) -> None:
        super().__init__()
        self.notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def test_all_set_opens_once_every_object_is_indexed_with_one_wakeup() -> None:
    async def scenario() -> tuple[list[bool], int, int]:
        toggles = CountedToggleSet(all)
        toggles._condition = condition = CountingCondition()
        states = [toggles.is_on()]  # no toggles: all([]) is True, as with Kopf's set
        objects = [await toggles.make_toggle(name=f"object-{i}") for i in range(50)]
        states.append(toggles.is_on())
        released = []
        workers = [asyncio.create_task(toggles.wait_for(True)) for _ in range(20)]
        for worker in workers:
            worker.add_done_callback(lambda _: released.append(toggles.is_on()))
        await asyncio.sleep(0)
        notified_before = condition.notified
        for toggle in objects[:-1]:
            await toggles.drop_toggle(toggle)
            await asyncio.sleep(0)
        states.append(toggles.is_on())
        assert not released
        await toggles.drop_toggles(objects[-1:])
        await asyncio.gather(*workers)
        states.append(toggles.is_on())
        return states, condition.notified - notified_before, len(released)

    states, wakeups, released = asyncio.run(scenario())
    assert states == [True, False, False, True]
    assert wakeups == 1, "the parked workers were woken for drops that did not open the barrier"
    assert released == 20


def test_turning_toggles_keeps_the_count_for_all_and_any() -> None:
    async def scenario() -> list[tuple[bool, bool]]:
        every, some = CountedToggleSet(all), CountedToggleSet(any)
        a, b = await every.make_toggle(True), await every.make_toggle(False)
        c = await some.make_toggle(False)
        seen = [(every.is_on(), some.is_on())]
        await b.turn_to(True)
        await c.turn_to(True)
        seen.append((every.is_on(), some.is_on()))
        await a.turn_to(False)
        await c.turn_to(False)
        seen.append((every.is_on(), some.is_on()))
        await every.drop_toggle(a)  # the only one off: dropping it opens the set
        await some.drop_toggle(c)
        seen.append((every.is_on(), some.is_on()))
        await a.turn_to(True)  # no longer in the set: counts for nothing
        seen.append((every.is_on(), len(every) == 1))
        return seen

    assert asyncio.run(scenario()) == [(False, False), (True, True), (False, False), (True, False), (True, True)]


def test_a_waiter_on_one_toggle_is_woken_by_that_toggle() -> None:
    async def scenario() -> bool:
        toggles = CountedToggleSet(all)
        first, _second = await toggles.make_toggle(False), await toggles.make_toggle(False)
        waiter = asyncio.create_task(first.wait_for(True))
        await asyncio.sleep(0)
        await first.turn_to(True)  # the set stays off (second is off): the toggle's own waiter must still wake
        await asyncio.wait_for(waiter, timeout=5)
        return toggles.is_on()

    assert asyncio.run(scenario()) is False


def test_install_makes_kopf_build_counted_sets() -> None:
    from trainingjob.operator.toggles import install

    original = aiotoggles.ToggleSet
    try:
        install()
        assert aiotoggles.ToggleSet is CountedToggleSet
    finally:
        aiotoggles.ToggleSet = original  # type: ignore[misc]
