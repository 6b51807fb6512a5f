"""Connections to the webhook port: a deadline for each request's headers that leaves idle keep-alive connections
alone, and a cap on connections that sheds the ones still waiting for their headers first (issue 41).

Why not aiohttp's own bound: its only timer is the keep-alive one, which closes a connection that has no request
in hand, so it cannot tell a client sending half its headers and going silent (a slowloris: held 3630 s, aiohttp's
default) from the API server's connection waiting for its next call. Cutting those at 30 s was tried and undone:
the API server then re-opened connections and made more conversion calls per write. So the port follows each
connection's HTTP/1.1 framing itself (RequestFramer: headers end at CRLF CRLF, then Content-Length bytes of body),
gives a request `header_seconds` from its first byte (a new connection: from its start) to the end of its
headers, and never times a connection between two requests. A body is bounded where it is read
(ServerLimits.body_seconds); one sent chunked cannot be followed, so that connection is closed `lost_seconds` later
(the API server always sends Content-Length).

The cap (`max_connections`, default 512: far under a pod's 1024 open files, far over what the API server opens): a
new connection past it first sheds the oldest one stale with its headers (below), else the oldest still waiting for
them, else the oldest of the address holding the most connections, so idle connections held by one pod cannot keep
the API server out; only when every connection is mid-request is the new one refused. When `waiting_per_address`
connections of one address wait for their headers, a new one of that address sheds its oldest stale one (a fresh one
is never shed for this), so one pod's silent connections are bounded by its own new ones and cannot shed the API
server's fresh ones. "Stale": waiting for `shed_waiting_after` (2 s) or more; a connection waiting for less is shed
only for a new one past the cap when none is stale, because under load it is the API server's call whose headers are
unread yet, and a call cut mid-write fails (Go does not retry a POST). The TLS handshake has its own bound
(asyncio's: `handshake_seconds`); connections still in it are not counted (see docs/reliability.md).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from trainingjob.forwarding import ForwardingProtocol, GuardedSite

HEADER_END = b"\r\n\r\n"


@dataclass(frozen=True)
class ConnectionLimits:
    header_seconds: float = 10.0  # the API server sends a request's headers at once; a slowloris never finishes
    handshake_seconds: float = 10.0
    max_connections: int = 512
    waiting_per_address: int = 32
    # A connection waiting for its headers for less than this is not shed for its address's sake: under load it
    # may be the API server's call whose headers sit unread behind a busy event loop, and a call cut while the API
    # server writes it fails the user's request (a create at 5000 x 8 got HTTP 500 "write: broken pipe"; another
    # such run shed 3 connections). A slowloris is older than this long before its 10 s are up.
    shed_waiting_after: float = 2.0
    max_header_bytes: int = 64 * 1024  # aiohttp refuses a field over 8190 bytes long before this
    lost_seconds: float = 30.0  # how long a connection whose framing is lost (a chunked body) lives on


class RequestFramer:
    """Follows the requests on one connection just far enough to know whether one's headers are still arriving.

    `waiting` is true from the connection's start until its first request's headers end, and from the first byte
    of each later request until its headers end; false while a body arrives and between requests. `lost`: a body
    this framer cannot follow (chunked, a Content-Length that is not a number) or headers past `max_header_bytes`
    (aiohttp answers those 400 itself): the connection must not outlive its current request."""

    def __init__(self, max_header_bytes: int = ConnectionLimits.max_header_bytes) -> None:
        self.max_header_bytes = max_header_bytes
        self.head = bytearray()  # what has arrived of the current request's headers
        self.body_left = 0
        self.requests = 0  # requests whose headers have ended
        self.lost = False

    @property
    def waiting(self) -> bool:
        return not self.lost and (self.requests == 0 or bool(self.head))

    def feed(self, data: bytes) -> None:
        while data and not self.lost:
            if self.body_left:
                taken = min(self.body_left, len(data))
                self.body_left -= taken
                data = data[taken:]
                continue
            searched_from = max(0, len(self.head) - len(HEADER_END) + 1)
            self.head += data
            end = self.head.find(HEADER_END, searched_from)
            if end < 0:
                self.lost = len(self.head) > self.max_header_bytes
                return
            block, data = bytes(self.head[:end]), bytes(self.head[end + len(HEADER_END) :])
            self.head.clear()
            self.requests += 1
            self.body_left = self._body_length(block)

    def _body_length(self, block: bytes) -> int:
        for line in block.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"transfer-encoding" or (name == b"content-length" and not value.isdigit()):
                self.lost = True
                return 0
            if name == b"content-length":
                return int(value)
        return 0


class FramedProtocol(ForwardingProtocol):
    """aiohttp's protocol behind the framer, the header deadline and the connection table."""

    def __init__(self, inner: Any, table: ConnectionTable) -> None:
        super().__init__(inner)
        self.table = table
        self.framer = RequestFramer(table.limits.max_header_bytes)
        self.address = ""
        self.transport: asyncio.Transport | None = None
        self.deadline: asyncio.TimerHandle | None = None  # for the headers of the request being sent
        self.waiting_since = 0.0  # the loop's time when the headers now awaited began to be awaited
        self.expiry: asyncio.TimerHandle | None = None  # for the connection, once its framing is lost

    @property
    def waiting(self) -> bool:
        return self.framer.waiting

    def stale(self, now: float) -> bool:
        """Waiting for its headers for long enough to be shed: not a call whose headers are merely unread yet."""
        return self.waiting and now - self.waiting_since >= self.table.limits.shed_waiting_after

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.table.admit(self):
            transport.abort()
            return
        self.transport = transport
        self._time_headers()
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:
            return  # refused: aiohttp never saw it
        self.table.release(self)
        self._untime()
        if self.expiry is not None:
            self.expiry.cancel()
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.framer.feed(data)
        self._time_headers()
        if self.framer.lost and self.expiry is None:
            # A body it cannot follow: the request in hand gets the time of a body, then the connection goes.
            self.expiry = asyncio.get_running_loop().call_later(self.table.limits.lost_seconds, self._lost)
        self.inner.data_received(data)

    def shed(self) -> None:
        """Close now: too slow with its headers, its framing lost too long ago, or its slot is needed."""
        self.table.release(self)
        self._untime()
        if self.expiry is not None:
            self.expiry.cancel()
        if self.transport is not None:
            self.transport.abort()

    def _time_headers(self) -> None:
        if not self.waiting:
            self._untime()
        elif self.deadline is None:
            loop = asyncio.get_running_loop()
            self.waiting_since = loop.time()
            self.deadline = loop.call_later(self.table.limits.header_seconds, self._expire)

    def _untime(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _lost(self) -> None:
        self.table.closed("unframed")
        self.shed()

    def _expire(self) -> None:
        self.deadline = None
        if self.waiting:
            self.table.closed("slow_headers")
            self.shed()


@dataclass
class ConnectionTable:
    """The open connections, oldest first, and who is shed when the port is full."""

    limits: ConnectionLimits
    # Told of every connection the port closes or refuses, by reason: slow_headers (its headers took too long),
    # shed (its slot went to a new connection past the cap), shed_per_address (its address had too many waiting
    # for their headers, this one for 2 s or more), refused (the port was full of requests in progress), unframed
    # (a chunked body, `lost_seconds` on). The operator counts them (trainingjob_webhook_connections_closed_total).
    on_close: Callable[[str], None] = lambda _: None
    open: dict[FramedProtocol, None] = field(default_factory=dict)  # insertion order is age
    counts: Counter[str] = field(default_factory=Counter)

    def closed(self, reason: str) -> None:
        self.counts[reason] += 1
        self.on_close(reason)

    def admit(self, new: FramedProtocol) -> bool:
        now = asyncio.get_running_loop().time()
        waiting_here = [each for each in self.open if each.address == new.address and each.waiting]
        stale_here = next((each for each in waiting_here if each.stale(now)), None)
        if len(waiting_here) >= self.limits.waiting_per_address and stale_here is not None:
            self._shed(stale_here, "shed_per_address")
        if len(self.open) >= self.limits.max_connections:
            victim = self._victim(now)
            if victim is None:
                self.closed("refused")
                return False
            self._shed(victim, "shed")
        self.open[new] = None
        return True

    def release(self, connection: FramedProtocol) -> None:
        self.open.pop(connection, None)

    def _victim(self, now: float) -> FramedProtocol | None:
        """The oldest connection stale with its headers; else the oldest waiting (the port is full: a fresh one
        goes before one that finished a request); else one of the address holding the most between requests."""
        waiting = next((each for each in self.open if each.stale(now)), None)
        waiting = waiting or next((each for each in self.open if each.waiting), None)
        if waiting is not None:
            return waiting
        by_address = Counter(each.address for each in self.open if each.framer.body_left == 0)
        if not by_address:
            return None
        busiest = by_address.most_common(1)[0][0]
        return next(each for each in self.open if each.address == busiest and each.framer.body_left == 0)

    def _shed(self, connection: FramedProtocol, reason: str) -> None:
        self.closed(reason)
        connection.shed()


class FramedSite(GuardedSite):
    """aiohttp's TCP site with TLS, every connection behind FramedProtocol and its table instead of the guard."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        ssl_context: Any,
        limits: ConnectionLimits,
        on_close: Callable[[str], None] = lambda _: None,
    ):
        super().__init__(
            runner,
            host,
            port,
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            lifetime=None,
            handshake_timeout=limits.handshake_seconds,
        )
        self.table = ConnectionTable(limits, on_close)

    def protocols(self, server: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: FramedProtocol(server(), self.table)
