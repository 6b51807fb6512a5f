"""`GET /api/queue-positions`: where the UI's waiting jobs stand in Kueue's queues, read when a page asks.

Positions are not in the jobs' status (queueing/visibility.py says why), and they move without any change to the
job, so the watch that feeds the list cannot carry them. The pages ask this endpoint every few seconds while they
show a waiting job; the answer comes from Kueue's visibility API with the UI user's credentials, one request per
LocalQueue, and is kept for CACHE_SECONDS so that many open tabs cost one read.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from trainingjob.queueing.visibility import PositionReader, waiting
from trainingjob.ui.store import JobStore

CACHE_SECONDS = 3.0
TIMEOUT = aiohttp.ClientTimeout(sock_connect=10, sock_read=30)


class PositionCache:
    """The last answer for the store's waiting jobs and when it was read; one read at a time."""

    def __init__(self, api: Any, store: JobStore) -> None:
        self.reader = PositionReader(api, TIMEOUT)
        self.store = store
        self.read_at = -CACHE_SECONDS
        self.answer: list[dict[str, Any]] = []
        self.lock = asyncio.Lock()

    async def positions(self) -> list[dict[str, Any]]:
        async with self.lock:
            if time.monotonic() - self.read_at >= CACHE_SECONDS:
                jobs = [job for job in self.store.jobs.values() if waiting(job)]
                places = await self.reader.places(jobs, datetime.now(UTC))
                self.answer = [
                    {"namespace": namespace, "name": name, **place.as_dict()}
                    for (namespace, name), place in sorted(places.items())
                ]
                self.read_at = time.monotonic()
            return self.answer


POSITIONS = web.AppKey("positions", PositionCache)


async def queue_positions(request: web.Request) -> web.Response:
    """Every waiting job's place; `?namespace=&name=` narrows the answer to one job (its page)."""
    answer = await request.app[POSITIONS].positions()
    namespace, name = request.query.get("namespace"), request.query.get("name")
    if namespace is not None and name is not None:
        answer = [row for row in answer if row["namespace"] == namespace and row["name"] == name]
    return web.json_response(answer)
