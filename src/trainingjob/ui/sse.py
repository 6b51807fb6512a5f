"""Server-Sent Events over aiohttp: one event per queue item, a comment every few seconds so a closed browser
connection is noticed and proxies keep the stream open."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from trainingjob.ui.store import Subscriber

HEARTBEAT_SECONDS = 15.0


async def open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    return response


async def send(response: web.StreamResponse, event: str, data: Any) -> None:
    payload = json.dumps(data, separators=(",", ":"))
    await response.write(f"event: {event}\ndata: {payload}\n\n".encode())


async def pump(response: web.StreamResponse, subscriber: Subscriber) -> None:
    """Forward the subscriber's queue until the browser goes away or the subscriber fell behind (then the last
    event sent is `resync`, and the browser reconnects for a fresh snapshot)."""
    while True:
        try:
            event, data = await asyncio.wait_for(subscriber.queue.get(), HEARTBEAT_SECONDS)
        except TimeoutError:
            await response.write(b": keep-alive\n\n")
            continue
        await send(response, event, data)
        if event == "resync":
            return
