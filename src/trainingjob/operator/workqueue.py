"""A client-go style work queue: each key at most once in the queue, never processed twice at the same time.

Events for a job that arrive while it is being reconciled mark it dirty, so it runs once more afterwards (events
coalesce instead of piling up); `add_after` keeps one timer per key for deadlines and backoff instead of a
polling loop per object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class WorkQueue:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}

    def add(self, key: Hashable) -> None:
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        """Make sure `key` is processed within `delay` seconds: one timer per key, the sooner deadline wins.

        Keeping the sooner one is always safe: every reconcile re-derives its own next deadline from the job.
        """
        loop = asyncio.get_running_loop()
        when = loop.time() + max(delay, 0.0)
        existing = self._timers.get(key)
        if existing is not None and existing.when() <= when:
            return
        self.forget(key)
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    async def get(self) -> Hashable:
        key = await self._queue.get()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def timers(self) -> int:
        return len(self._timers)
