"""Protocols in front of aiohttp's own, for every server that pods can reach: the progress endpoint, the operator's
metrics port, the webhook port (webhooks/connections.py) and the local node agent's servers. Each decides who is
let in and when a connection is cut, and passes every event of an admitted connection on to aiohttp unchanged.

ConnectionGuard: at most `max_connections` open, `per_address` from one client address, each at most `lifetime`
seconds; aiohttp's keep-alive timer then closes a connection that has no whole request within its idle bound (it
cannot tell half-sent headers from an idle connection: webhooks/connections.py does, where that matters).
Connections still in their TLS handshake are bounded in time only (`handshake_timeout`): asyncio hands a
connection to the protocol once the handshake is over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


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


class GuardedProtocol(ForwardingProtocol):
    """Passes a connection to aiohttp's protocol unless too many are open, in all or from its address; aborts it
    after `lifetime` seconds."""

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        super().__init__(inner)
        self.guard = guard
        self.address: str | None = None  # set once admitted
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self.guard.admit(address):
            transport.abort()  # type: ignore[attr-defined]
            return
        self.address = address
        if self.guard.lifetime is not None:
            self.timer = asyncio.get_running_loop().call_later(self.guard.lifetime, transport.abort)  # type: ignore[attr-defined]
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.address is None:
            return
        self.guard.release(self.address)
        if self.timer is not None:
            self.timer.cancel()
        self.inner.connection_lost(exc)


@dataclass
class ConnectionGuard:
    """A protocol factory around aiohttp's: at most `max_connections` open, at most `per_address` of them from one
    client address, each at most `lifetime` seconds. Without the per-address bound, 260 idle TLS connections from
    one pod took every slot and real reports were refused (issue 41)."""

    factory: Callable[[], asyncio.Protocol]
    max_connections: int
    lifetime: float | None  # None: a connection may stay as long as aiohttp keeps it
    per_address: int = 16
    open: int = 0
    by_address: dict[str, int] = field(default_factory=dict)  # only addresses with connections open

    def __call__(self) -> GuardedProtocol:
        return GuardedProtocol(self.factory(), self)

    def admit(self, address: str) -> bool:
        """Count a new connection from `address`, unless it would pass either bound."""
        if self.open >= self.max_connections or self.by_address.get(address, 0) >= self.per_address:
            return False
        self.open += 1
        self.by_address[address] = self.by_address.get(address, 0) + 1
        return True

    def release(self, address: str) -> None:
        self.open -= 1
        left = self.by_address.get(address, 1) - 1
        if left > 0:
            self.by_address[address] = left
        else:
            self.by_address.pop(address, None)


class GuardedSite(web.BaseSite):
    """aiohttp's TCP site with the connection guard and a bound on the TLS handshake (HTTPS), or plain HTTP when
    `ssl_context` is None."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: Any,
        max_connections: int,
        lifetime: float | None,
        handshake_timeout: float,
        per_address: int = 16,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self.host, self.requested_port = host, port
        self.max_connections, self.lifetime, self.handshake_timeout = max_connections, lifetime, handshake_timeout
        self.per_address = per_address
        self.guard: ConnectionGuard | None = None

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self.host}:{self.requested_port}"

    def protocols(self, server: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """The protocol factory around aiohttp's `server`: the connection guard (webhooks/connections.py has its
        own)."""
        self.guard = ConnectionGuard(server, self.max_connections, self.lifetime, self.per_address)
        return self.guard

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self.protocols(server),
            self.host,
            self.requested_port,
            ssl=self._ssl_context,
            ssl_handshake_timeout=self.handshake_timeout if self._ssl_context else None,
            backlog=self._backlog,
            reuse_address=True,
        )


@dataclass(frozen=True)
class PortLimits:
    """The bounds of one port. The defaults are the operator's metrics port's: Prometheus keeps one connection and
    scrapes every 15-60 s; the kubelet opens one per probe."""

    idle_seconds: float = 15.0  # to send a whole request, and between two requests on one connection
    lifetime: float | None = 120.0  # no connection lasts longer (a client that never reads its answer)
    max_connections: int = 128
    per_address: int = 16  # one pod cannot take every slot: the kubelet's probe comes from another address
    handshake_seconds: float = 10.0  # TLS only


async def serve_bounded(
    app: web.Application, host: str, port: int, limits: PortLimits, ssl_context: Any = None
) -> web.AppRunner:
    """Serve `app` on host:port behind a ConnectionGuard with `limits`; the runner, to clean up."""
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=limits.idle_seconds)
    await runner.setup()
    site = GuardedSite(
        runner,
        host,
        port,
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        lifetime=limits.lifetime,
        handshake_timeout=limits.handshake_seconds if ssl_context else 0,
        per_address=limits.per_address,
    )
    await site.start()
    return runner
