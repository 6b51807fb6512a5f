"""Expectations, as in the ReplicaSet controller: what the operator wrote that its caches do not show yet.

A pod created is claimed by name until the pod watch shows it (`sighted`, called from the informer's index as the
event arrives) or a plan finds it in the cache; a pod or gang object deleted is released by uid until the cache shows
it deleting or gone. Entries expire after client-go's ExpectationsTimeout (5 minutes), so an event that never comes
(a pod created and deleted again while the watch was cut) cannot pin one for longer.

The expiry used to be 30 s. Under a saturated API server the pod watch can lag that much: a claim lapsed before its
pod was seen, and the planner created the pod again, only to meet AlreadyExists (a 1000 x 8 bench run made 9069 pod
creates for 8000 pods, docs/benchmarks.md). Settling on the event, not on the clock, makes the lag harmless.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

# client-go's ExpectationsTimeout: how long a write may go unseen before the cache is trusted again.
EXPECTATION_TTL_SECONDS = 300.0


def pending_expectations(
    memory: dict[Hashable, dict[str, float]],
    key: Hashable,
    settled: set[str],
    keep_unseen: bool = True,
    present: set[str] | None = None,
    now: float | None = None,
) -> set[str]:
    """Expectations the cache has not caught up with; settled, vanished or expired ones are dropped."""
    entries = memory.get(key)
    if not entries:
        return set()
    now = time.monotonic() if now is None else now
    for name, at in list(entries.items()):
        vanished = not keep_unseen and present is not None and name not in present
        if name in settled or vanished or now - at > EXPECTATION_TTL_SECONDS:
            del entries[name]
    if not entries:
        del memory[key]
    return set(entries)


def sighted(memory: dict[Hashable, dict[str, float]], key: Hashable, name: str) -> None:
    """The watch showed `name` under `key`: whatever the planner sees next, that expectation is met."""
    entries = memory.get(key)
    if entries is not None and entries.pop(name, None) is not None and not entries:
        del memory[key]
