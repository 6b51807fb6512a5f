"""A small read cache for lookups that are needed now and then (a namespace, a node, a namespace's quotas): values
by key for a while, bounded in size, one fetch per key at a time however many callers ask at once."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

V = TypeVar("V")
MAX_ENTRIES = 10_000


class TtlCache(Generic[V]):
    """Values by key for `ttl` seconds; at most `max_entries` (oldest dropped); one fetch per key at a time."""

    def __init__(
        self, fetch: Callable[[str], Awaitable[V]], ttl: float, max_entries: int = MAX_ENTRIES, clock=time.monotonic
    ) -> None:
        self.fetch = fetch
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self.entries: OrderedDict[str, tuple[float, V]] = OrderedDict()
        self.inflight: dict[str, asyncio.Future[V]] = {}

    def forget(self, key: str) -> None:
        """The next get() asks again."""
        self.entries.pop(key, None)

    def put(self, key: str, value: V) -> None:
        self.entries[key] = (self.clock(), value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)

    async def get(self, key: str) -> V:
        entry = self.entries.get(key)
        if entry is not None and self.clock() - entry[0] < self.ttl:
            return entry[1]
        running = self.inflight.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self.inflight[key] = future
        try:
            value = await self.fetch(key)
            self.put(key, value)
            future.set_result(value)
            return value
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self.inflight[key]
