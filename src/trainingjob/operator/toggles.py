"""Kopf's "operator indexed" barrier, woken only when it opens or closes instead of on every object.

Kopf (1.45) holds every object's processing until all indexes are filled: each listed object gets a toggle in one
`ToggleSet(all)`, dropped once that object is indexed, and each object's worker parks in `wait_for(True)`. The stock
set calls `notify_all()` on every toggle made, turned or dropped, and each woken waiter re-evaluates `all()` over
every toggle: cubic in the number of listed objects. Measured with Kopf's own ToggleSet and one waiter per toggle:
1000 objects 1.3 s, 2000 6 s, 4000 38 s, 8000 362 s of CPU before the first reconcile after a restart. This set
keeps a count of toggles that are on and notifies only when the aggregate state flips (and for a toggle someone
waits on by itself), so a restart with 8000 objects passes the barrier in a fraction of a second (bench/toggles.py).

`install()` replaces the class Kopf instantiates (`aiotoggles.ToggleSet`, looked up at run time); nothing of
Kopf's code is copied or changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kopf._cogs.aiokits import aiotoggles


class CountedToggle(aiotoggles.Toggle):
    """A toggle of a CountedToggleSet: keeps the set's count of toggles that are on."""

    def __init__(self, state: bool, *, name: str | None, owner: CountedToggleSet) -> None:
        super().__init__(state, name=name, condition=owner._condition)
        self._owner = owner
        self._own_waiters = 0

    async def turn_to(self, state: bool, /) -> None:
        async with self._condition:
            if bool(state) == self._state:
                return
            before = self._owner.is_on()
            self._state = bool(state)
            if self in self._owner._toggles:
                self._owner._on += 1 if self._state else -1
            if self._own_waiters or self._owner.is_on() != before:
                self._condition.notify_all()

    async def wait_for(self, state: bool, /) -> None:
        self._own_waiters += 1
        try:
            await super().wait_for(state)
        finally:
            self._own_waiters -= 1


class CountedToggleSet(aiotoggles.ToggleSet):
    """A ToggleSet whose state is a count, not a scan, and whose waiters wake only when that state flips."""

    def __init__(self, fn: Callable[[Iterable[bool]], bool]) -> None:
        super().__init__(fn)
        self._on = 0

    def is_on(self) -> bool:
        if self._fn is all:
            return self._on == len(self._toggles)
        if self._fn is any:
            return self._on > 0
        return super().is_on()

    async def make_toggle(self, state: bool = False, /, *, name: str | None = None) -> aiotoggles.Toggle:
        toggle = CountedToggle(state, name=name, owner=self)
        async with self._condition:
            before = self.is_on()
            self._toggles.add(toggle)
            self._on += toggle.is_on()
            self._notify_if_flipped(before)
        return toggle

    async def drop_toggle(self, toggle: aiotoggles.Toggle) -> None:
        await self.drop_toggles([toggle])

    async def drop_toggles(self, toggles: Iterable[aiotoggles.Toggle]) -> None:
        async with self._condition:
            before = self.is_on()
            for toggle in toggles:
                if toggle in self._toggles:
                    self._toggles.remove(toggle)
                    self._on -= toggle.is_on()
            self._notify_if_flipped(before)

    def _notify_if_flipped(self, before: bool) -> None:
        if self.is_on() != before:
            self._condition.notify_all()


def install() -> None:
    """Make Kopf build its operator-wide toggle sets (indexed, paused) as CountedToggleSets."""
    aiotoggles.ToggleSet = CountedToggleSet  # type: ignore[misc]
