"""Expectations, as in the ReplicaSet controller: what the operator wrote that its caches do not show yet.

A pod created is claimed by name until the cache shows it; a pod or gang object deleted is released by uid until the
cache shows it deleting or gone. Entries expire, so a missed event cannot pin one.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

# A pod we created shows up in the cache within a second; after this long, trust the cache again.
CLAIM_TTL_SECONDS = 30.0


def pending_expectations(
    memory: dict[Hashable, dict[str, float]],
    key: Hashable,
    settled: set[str],
    keep_unseen: bool = True,
    present: set[str] | None = None,
) -> set[str]:
    """Expectations the cache has not caught up with; settled, vanished or expired ones are dropped."""
    entries = memory.get(key)
    if not entries:
        return set()
    now = time.monotonic()
    for name, at in list(entries.items()):
        vanished = not keep_unseen and present is not None and name not in present
        if name in settled or vanished or now - at > CLAIM_TTL_SECONDS:
            del entries[name]
    if not entries:
        del memory[key]
    return set(entries)
