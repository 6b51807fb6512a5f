"""EndpointSlices the operator wrote that its cache does not show yet (expectations, for slices).

During a job's start every pod event brings a plan; a plan made before the slice watch delivered our last write
would write the same slice again. So a write is remembered as what the cache will show, and plans see it in place
of the cached slice until the cache shows exactly that, or for at most PUBLISHED_TTL_SECONDS (after which a slice
someone else changed is put right again).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable

from trainingjob.builders.endpoints import SliceView

PUBLISHED_TTL_SECONDS = 60.0


class PublishedSlices:
    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = PUBLISHED_TTL_SECONDS) -> None:
        self.clock = clock
        self.ttl = ttl
        self.pending: dict[Hashable, dict[str, tuple[SliceView, float]]] = {}

    def wrote(self, key: Hashable, views: Iterable[SliceView]) -> None:
        now = self.clock()
        for view in views:
            self.pending.setdefault(key, {})[view.name] = (view, now)

    def overlay(self, key: Hashable, cached: Iterable[SliceView]) -> list[SliceView]:
        """The cached slices of job `key`, with our writes the cache has not caught up with in their place."""
        seen = {view.name: view for view in cached}
        entries = self.pending.get(key)
        if not entries:
            return list(seen.values())
        now = self.clock()
        for name, (view, at) in list(entries.items()):
            if seen.get(name) == view or now - at > self.ttl:
                del entries[name]
            else:
                seen[name] = view
        if not entries:
            del self.pending[key]
        return list(seen.values())

    def forget(self, key: Hashable) -> None:
        self.pending.pop(key, None)
