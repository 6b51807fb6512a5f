"""A protocol in front of aiohttp's own: what the connection guards of the progress endpoint, the metrics port
and the webhook port share (progress/limits.py, webhooks/connections.py). Each decides who is let in and when a
connection is cut, and passes every event of an admitted connection on to aiohttp unchanged."""

from __future__ import annotations

import asyncio
from typing import Any


class ForwardingProtocol(asyncio.Protocol):
    def __init__(self, inner: Any) -> None:
        self.inner = inner  # aiohttp's RequestHandler

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()
