"""Expectations, as in the ReplicaSet controller: what a controller wrote for one object that its caches do not show
yet, so that a plan made from a lagging cache neither writes it again nor waits for it forever.

- A child created is expected by name until the watch shows it (`seen`, called from the informer's index as the
  event arrives) or a plan finds it in the cache.
- A child deleted is expected gone by uid until the cache shows it deleting or gone.
Children whose views hold only what the controller writes (Services, ConfigMaps, EndpointSlices, Workloads) need
no expectation of their own: what was written stands in for the cached view in the index itself until the cache
shows it (store.Index, informers.stand_in; Watch.stands_in says which).
Creations and deletions expire after client-go's ExpectationsTimeout (5 minutes), so an event that never comes
(a pod created and deleted again while the watch was cut) cannot pin one for longer.

The expiry used to be 30 s. Under a saturated API server the pod watch can lag that much: a claim lapsed before its
pod was seen, and the planner created the pod again, only to meet AlreadyExists (a 1000 x 8 bench run made 9069 pod
creates for 8000 pods, docs/benchmarks.md). Settling on the event, not on the clock, makes the lag harmless.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

# client-go's ExpectationsTimeout: how long a write may go unseen before the cache is trusted again.
EXPECTATION_TTL_SECONDS = 300.0


def pending(
    entries: dict[str, float],
    settled: set[str],
    now: float,
    present: set[str] | None = None,
    ttl: float = EXPECTATION_TTL_SECONDS,
) -> set[str]:
    """Expectations in `entries` the cache has not caught up with; settled, vanished (not in `present`, when
    given) or expired ones are dropped."""
    for name, at in list(entries.items()):
        vanished = present is not None and name not in present
        if name in settled or vanished or now - at > ttl:
            del entries[name]
    return set(entries)


@dataclass(slots=True)
class Expectations:
    """One object's expectations; empty, it costs two empty dicts."""

    created: dict[str, float] = field(default_factory=dict)  # child name -> when created
    deleted: dict[str, float] = field(default_factory=dict)  # child uid -> when deleted

    def expect_created(self, names: Iterable[str], now: float) -> None:
        self.created.update(dict.fromkeys(names, now))

    def seen(self, name: str) -> None:
        """The watch showed child `name`: whatever the planner sees next, that creation is met."""
        self.created.pop(name, None)

    def pending_creations(self, cached: set[str], now: float) -> set[str]:
        """Names created that the cache does not show yet."""
        return pending(self.created, cached, now)

    def expect_deleted(self, uids: Iterable[str], now: float) -> None:
        self.deleted.update(dict.fromkeys(uids, now))

    def pending_deletions(self, deleting: set[str], present: set[str], now: float) -> set[str]:
        """uids deleted that the cache still shows alive (not yet deleting, and not gone)."""
        return pending(self.deleted, deleting, now, present)
