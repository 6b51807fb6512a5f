"""Every wait of the harness is guarded: a dead watch, an exited contender or a stall ends the run, with what was seen.

Why: three waits once ignored a dead harness watch, and a live watch that missed a transition waited out the whole
timeout (an hour) and said nothing. Each tick a Watchdog checks why the run could no longer finish (the submitter
failed, the contender exited, the watch task ended); every `list_every_s` it LISTs the pods (and the contender's job
objects) and compares them with what the watch delivered: an object two LISTs agree on that the watch still shows
otherwise may have been missed, which is recorded with the run (see _cross_check). Where a wait expects change (pods
starting, jobs finishing), nothing changing for `stall_s`, in the watch or the LISTs, is a stall.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.client import ApiError

LIST_EVERY_S = 60.0
STALL_S = 300.0

# A LIST in the watch's terms: pod/<name> or job/<name> -> (state, the object's resourceVersion as an integer).
Listed = dict[str, tuple[str, int]]
Listing = Callable[[], Awaitable[Listed]]


@dataclass(frozen=True)
class WaitLimits:
    """How long a wait may take at most, how often it cross-checks the watch with a LIST, and how long nothing may
    change where change is expected (`python -m bench --timeout --list-every --stall-seconds`)."""

    within_s: float = 3600.0
    list_every_s: float = LIST_EVERY_S
    stall_s: float = STALL_S


class Stalled(RuntimeError):
    """The run cannot go on measuring anything true; `seen` is what the harness had seen until then."""

    def __init__(self, why: str, seen: dict[str, Any]) -> None:
        super().__init__(f"{why}; seen until then: {seen}")
        self.why = why
        self.seen = seen


def missed_by_watch(
    earlier: Mapping[str, tuple[str, int]],
    listed: Mapping[str, tuple[str, int]],
    seen: Mapping[str, str],
    watched: Mapping[str, int] | None = None,
) -> list[str]:
    """Objects two LISTs agree on (same state, same version) while the watch still shows another state (or none).

    `watched` is how far each watch ("pod", "job") has got: the newest resourceVersion it delivered. An object newer
    than that is one the watch has not reached yet, not one it missed: at 1000 x 8 the harness, parsing the pod
    stream and a 50 MB LIST on two busy cores, ran more than a minute behind, and the first version of this check
    ended a sound run for it. (Versions are compared as integers: on this one-etcd cluster they are etcd revisions.)
    """
    missed = []
    for name, (state, version) in listed.items():
        behind = watched is not None and version > watched.get(name.split("/", 1)[0], 0)
        if earlier.get(name) == (state, version) and seen.get(name) != state and not behind:
            missed.append(name)
    return sorted(missed)


@dataclass
class Watchdog:
    """Called on every tick of a wait (`await check()`); raises the reason the run must end."""

    broken: Callable[[], BaseException | None]
    seen: Callable[[], dict[str, str]]
    summary: Callable[[], dict[str, Any]]
    listing: Listing | None = None
    # What changes while the run progresses (pod events, jobs Running); None where the wait is for quiet.
    progress: Callable[[], Hashable] | None = None
    list_every_s: float = LIST_EVERY_S
    stall_s: float = STALL_S
    # How far each watch has got (see missed_by_watch); None: judge without it.
    watched: Callable[[], Mapping[str, int]] | None = None
    # False for a wait that does not depend on the watch (a restart's re-observe reads the operator's metrics).
    cross_checking: bool = True
    lists: int = 0
    # Cross-check LISTs the API server did not answer (a 504 for 8000 pods on a loaded machine): skipped, counted.
    failed_lists: int = 0
    # What cross-checks found the watch disagreeing on (see _cross_check), one line per LIST; kept with the run.
    disagreements: list[str] = field(default_factory=list)
    _list_changes: int = 0
    _earlier: Listed | None = None
    _listed_at: float = field(default_factory=time.monotonic)
    _last_progress: Hashable = None
    _progress_at: float = field(default_factory=time.monotonic)

    def expecting(self, progress: Callable[[], Hashable] | None, cross_check: bool = True) -> Watchdog:
        """The same checks for the next wait, with its own idea of progress (the clock of a stall restarts).

        `cross_check=False` skips the minute's LIST during a wait that times something else than the watch: the
        LIST is awaited between two looks at the wait's condition, and at 5,000 x 8 it (40,000 pods, parsed by the
        harness on the same two cores) took about 30 s, by which a replacement pod's re-observe read 45.9 s while
        its metrics had said "done" at 28 s."""
        self.progress, self._last_progress, self._progress_at = progress, None, time.monotonic()
        self.cross_checking = cross_check
        return self

    async def check(self) -> None:
        problem = self.broken()
        if problem is not None:
            raise problem
        now = time.monotonic()
        if self.listing is not None and self.cross_checking and now - self._listed_at >= self.list_every_s:
            await self._cross_check(now)
        if self.progress is not None:
            mark = (self.progress(), self._list_changes)
            if mark != self._last_progress:
                self._last_progress, self._progress_at = mark, now
            elif now - self._progress_at >= self.stall_s:
                raise Stalled(f"nothing changed for {self.stall_s:.0f} s, in the watch or the LISTs", self.summary())

    async def _cross_check(self, now: float) -> None:
        assert self.listing is not None
        self._listed_at = now
        try:
            listed = await self.listing()
        except (ApiError, aiohttp.ClientError, TimeoutError):
            self.failed_lists += 1  # no cross-check this minute; the stall clock still runs
            return
        self.lists += 1
        self._list_changes += listed != self._earlier
        if self._earlier is not None:
            missed = missed_by_watch(self._earlier, listed, self.seen(), self.watched() if self.watched else None)
            if missed:
                # Recorded, not fatal: at 1000 x 8 on a loaded machine two LISTs agreed on states older than the watch
                # had delivered (job listed Pending at version 3721 while the watch, at 13988, had it Running), which
                # no missed event explains. A watch that really missed a change still ends the run: as a stall.
                self.disagreements.append(
                    f"{len(missed)} objects (first: {missed[0]} listed {listed[missed[0]]}, seen "
                    f"{self.seen().get(missed[0])}, watches at {self.watched() if self.watched else '?'})"
                )
        self._earlier = listed
