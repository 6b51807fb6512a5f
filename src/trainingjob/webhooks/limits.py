"""What the webhook server takes on at once, and from whom (issue 41: one 250 MiB POST to /convert took the
operator from 151 to 869 MiB, four at once to 1,379 MiB, against a 512 Mi limit; any pod could send them).

Body caps, sized from what the API server really sends:
- /mutate and /validate: one AdmissionReview carries the object and, on UPDATE, the old one. The API server reads
  at most 3 MiB of a request body and etcd stores at most 1.5 MiB per object, so 8 MiB holds any review of ours.
- /convert: a ConversionReview carries one object for a read, a write or a watch event, and a whole page for a
  list in another version than the stored one. kubectl and informers list in pages of 500; a stored job is 2-5 KiB
  (spec, status, managedFields), so a page is 1-3 MiB. 16 MiB holds that five times over, or an unpaginated list
  of some 3,000 jobs; a bigger one fails with a clear error, and the client should page (`--chunk-size`, `limit`).
  Why not more: the worker process that parses a review peaks at about 7 times its size (130 MiB for 16 MiB), the
  operator's own process at about 5 times while it holds the body and the answer, and the Deployment's limit of
  512 Mi covers the operator, its caches and the worker together.
Bytes in flight: at most `bytes_in_flight` of bodies are held at once (a request waits up to `wait_seconds` for
room, then gets 503 with Retry-After), and at most `requests` requests are answered at once. So memory stays
bounded however many requests come in: one review of the largest size at a time, and small ones beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class ServerLimits:
    admission_bytes: int = 8 * MIB
    conversion_bytes: int = 16 * MIB
    bytes_in_flight: int = 24 * MIB
    requests: int = 16
    wait_seconds: float = 10.0  # the API server waits up to 5 s (admission), 30 s (conversion), then gives up
    body_seconds: float = 15.0  # to receive a body: the API server sends at memory speed, a slow client is cut


class Busy(Exception):
    """No room for the request within the wait: answer 503 and let the caller retry."""


class RequestBudget:
    """Counts requests and the body bytes they hold; `reserve` waits for room, or raises Busy."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.requests = 0
        self.bytes = 0
        self.room = asyncio.Condition()

    def _fits(self, size: int) -> bool:
        return self.requests < self.limits.requests and self.bytes + size <= self.limits.bytes_in_flight

    @contextlib.asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        """Hold one request slot and `size` bytes while the block runs."""
        async with self.room:
            try:
                await asyncio.wait_for(self.room.wait_for(lambda: self._fits(size)), self.limits.wait_seconds)
            except TimeoutError:
                raise Busy(f"{self.requests} requests and {self.bytes} body bytes in flight") from None
            self.requests += 1
            self.bytes += size
        try:
            yield
        finally:
            async with self.room:
                self.requests -= 1
                self.bytes -= size
                self.room.notify_all()
