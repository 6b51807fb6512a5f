"""What keeps the progress endpoint cheap under abuse: per-key rate limits and a short-lived TokenReview cache (its
guard on connections, how many and how long each may take, is forwarding.py's).

Why each: every request that reaches authentication costs the API server a TokenReview, so floods are cut before
it (per client address) and repeated tokens are answered from memory; a well-behaved reporter sends one report
every few seconds (the SDK throttles to one per 2 s), so a per-pod limit far above that only stops runaways; and a
client that opens connections and sends nothing (or a byte at a time) must not hold sockets forever.
Everything is bounded in size: an entry not used for a while is forgotten, the oldest first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

V = TypeVar("V")
MAX_KEYS = 10_000


class BoundedMap(Generic[V]):
    """A dict that keeps at most `max_keys` entries, forgetting the least recently used."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self.entries: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.max_keys:
            self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass
class Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: `rate` requests per second on average, bursts of up to `burst`."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.buckets: BoundedMap[Bucket] = BoundedMap()

    def wait_seconds(self, key: str) -> float:
        """0 and one token taken if the request may go now; else the seconds until it may (nothing taken)."""
        now = self.clock()
        bucket = self.buckets.get(key) or Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        self.buckets.put(key, bucket)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.rate


def retry_after(seconds: float) -> str:
    """A Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


def token_key(token: str) -> str:
    """Tokens are kept only as their SHA-256: a memory dump must not hand out live credentials."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT (unverified: only used to forget a cached review no later than the token dies)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class ReviewCache:
    """TokenReview answers by token hash: accepted ones for `ttl` seconds (never past the token's own expiry),
    refused ones for `negative_ttl`; answers the API server could not give (5xx) are never kept."""

    def __init__(
        self,
        ttl: float = 60.0,
        negative_ttl: float = 10.0,
        max_keys: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.clock = clock
        self.wall_clock = wall_clock
        self.entries: BoundedMap[tuple[float, Any]] = BoundedMap(max_keys)

    def get(self, token: str) -> Any | None:
        entry = self.entries.get(token_key(token))
        if entry is None or entry[0] <= self.clock():
            return None
        return entry[1]

    def put(self, token: str, answer: Any, accepted: bool) -> None:
        ttl = self.ttl if accepted else self.negative_ttl
        expiry = token_expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self.wall_clock())
        if ttl > 0:
            self.entries.put(token_key(token), (self.clock() + ttl, answer))
