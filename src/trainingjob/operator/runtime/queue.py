"""A client-go style work queue, one per controller: each key at most once in the queue, never processed twice at
the same time, and rate-limited per key after failures.

Events for a job that arrive while it is being reconciled mark it dirty, so it runs once more afterwards (events
coalesce instead of piling up); `add_after` keeps one timer per key for deadlines and backoff instead of a
polling loop per object. `retry` is client-go's AddRateLimited: a key whose reconcile failed comes back after a
delay that doubles per failure in a row (1 s up to 5 minutes), until `succeeded` resets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from trainingjob.kube.backoff import doubling

# A reconcile that raised (the API server unreachable, a bug): 1 s doubling to 5 minutes.
RETRY_BASE = 1.0
RETRY_MAX = 300.0


class WorkQueue:
    def __init__(self, retry_base: float = RETRY_BASE, retry_max: float = RETRY_MAX) -> None:
        self.retry_base, self.retry_max = retry_base, retry_max
        self._failures: dict[Hashable, int] = {}
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
        self.cancel_timer(key)
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def cancel_timer(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def retry(self, key: Hashable) -> tuple[int, float]:
        """The key's reconcile failed: process it again after the backoff; (failures in a row, delay)."""
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = doubling(self.retry_base, self.retry_max, failures)
        self.add_after(key, delay)
        return failures, delay

    def succeeded(self, key: Hashable) -> None:
        """The key's reconcile went through: its next failure starts the backoff afresh."""
        self._failures.pop(key, None)

    def forget(self, key: Hashable) -> None:
        """The object is gone: no timer and no failure count is kept for it."""
        self.cancel_timer(key)
        self._failures.pop(key, None)

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
