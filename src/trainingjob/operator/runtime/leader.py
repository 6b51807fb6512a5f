"""Leader election on a coordination.k8s.io Lease, so several replicas can run and only one reconciles.

client-go's algorithm in small: a replica acquires the Lease when it is free or expired, renews it every
`retry_period`, and a standby takes over once the holder has not renewed for `lease_duration`. Standbys keep their
watches and indexes warm, so a takeover starts reconciling at once. A leader that cannot renew within
`renew_deadline` stops the process: continuing could let two replicas write at the same time.

Two details make that hold on real networks and clocks, both as in client-go:
- Expiry is judged on the observer's own monotonic clock: a replica notes when *it* saw the Lease record change
  and calls it expired only after `lease_duration` without a change. The holder's renewTime is another machine's
  wall clock; comparing it with ours would let a skewed clock steal a live Lease or never take over a dead one.
- Every acquire or renew attempt is cut off by a timeout, and a leader must complete a renewal within
  `renew_deadline` of starting its last successful one. A hung request therefore cannot keep a leader
  reconciling after standbys (which wait `lease_duration`, longer than `renew_deadline`) may have taken over.
- A leader renews optimistically: it replaces the Lease it last wrote (its resourceVersion is the precondition)
  without reading it first, one request instead of two, and reads only when that write conflicts (client-go's
  fast path since 1.27). A renewal then has a single request to get through a busy API server.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.runtime.lease_deadline import RenewDeadline

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str = "trainingjob-operator"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""

    def with_identity(self) -> LeaseSettings:
        identity = self.identity or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        return LeaseSettings(
            self.namespace, self.name, self.lease_duration, self.renew_deadline, self.retry_period, identity
        )


def one_line(error: BaseException) -> str:
    """An API error as one log line (an ApiException's str() spans headers and body over many lines)."""
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "{}").get("message")
        except (TypeError, ValueError, AttributeError):
            message = None
        return f"HTTP {error.status} {error.reason}: {message}" if message else f"HTTP {error.status} {error.reason}"
    return repr(error)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Observation:
    """The Lease record as this replica last saw it change, and when (on this replica's monotonic clock)."""

    record: tuple[Any, ...] | None = None
    time: float = 0.0

    @property
    def expires_at(self) -> float | None:
        """When the record expires by our clock unless it changes first (None: nothing held is observed)."""
        duration = self.record[1] if self.record is not None else None
        return self.time + duration if duration else None


def lease_record(spec: client.V1LeaseSpec) -> tuple[Any, ...]:
    """What a holder changes on every renewal; equal records mean nobody wrote the Lease in between."""
    return (
        spec.holder_identity,
        spec.lease_duration_seconds,
        spec.acquire_time,
        spec.renew_time,
        spec.lease_transitions,
    )


def observe(previous: Observation, spec: client.V1LeaseSpec, now: float) -> Observation:
    """Restart the expiry clock only when the record changed since we last looked."""
    record = lease_record(spec)
    return previous if record == previous.record else Observation(record, now)


def lease_is_free(lease: client.V1Lease, identity: str, observed: Observation, now: float) -> bool:
    """Ours, unheld, or unchanged for its whole duration as measured on our clock since we saw it change."""
    spec = lease.spec
    if not spec.holder_identity or spec.holder_identity == identity:
        return True
    return now - observed.time > (spec.lease_duration_seconds or 0)


EXPIRY_MARGIN = 0.05  # seconds past the computed expiry, so the attempt finds the Lease expired by our clock


def next_attempt_in(observed: Observation, retry_period: float, now: float) -> float:
    """How long a standby waits before its next attempt: the retry period, or less when the Lease it watches
    expires sooner. client-go waits the whole retry period; the takeover then comes up to that much (2 s) after
    the holder's Lease has expired by our clock, which a replacement pod's re-observe target (the Lease + 5 s,
    bench/findings.md) cannot spare. Expiry is judged exactly as before (lease_is_free), only looked at sooner. A
    Lease already expired whose take-over failed (a conflict, an API error) waits the whole period: no hot loop."""
    if observed.expires_at is None or observed.expires_at <= now:
        return retry_period
    return min(retry_period, observed.expires_at - now + EXPIRY_MARGIN)


class LeaderElector:
    def __init__(
        self,
        coordination: client.CoordinationV1Api,
        settings: LeaseSettings,
        clock: Callable[[], float] = time.monotonic,
        on_deadline_missed: Callable[[], None] | None = None,
    ) -> None:
        """`on_deadline_missed` (thread-safe: it is called from a thread) ends leadership at the renew deadline
        even while the event loop is too busy to notice it (lease_deadline.py); the process's exit."""
        self.coordination = coordination
        self.settings = settings.with_identity()
        self.is_leader = False
        self.observed = Observation()
        self._clock = clock
        # The Lease as our last successful write returned it (its resourceVersion), for the optimistic renewal.
        self.held: client.V1Lease | None = None
        self._on_deadline_missed = on_deadline_missed
        self._deadline = None
        if on_deadline_missed is not None:
            self._deadline = RenewDeadline(settings.renew_deadline, self._missed, clock)
        self._ended = threading.Lock()  # leadership ends once: on the loop or in the deadline's thread

    def _spec(self, now: datetime.datetime, transitions: int, acquired: datetime.datetime) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.settings.identity,
            lease_duration_seconds=int(self.settings.lease_duration),
            acquire_time=acquired,
            renew_time=now,
            lease_transitions=transitions,
        )

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True while we hold the Lease. Conflicts (another replica won) are a plain False."""
        if self.is_leader and self.held is not None and await self._renew_held(self.held):
            return True
        now = _now()
        try:
            lease = await self.coordination.read_namespaced_lease(self.settings.name, self.settings.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            spec = self._spec(now, 0, now)
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.settings.name), spec=spec)
            return await self._write(self.coordination.create_namespaced_lease(self.settings.namespace, body), spec)
        self.observed = observe(self.observed, lease.spec, self._clock())
        if not lease_is_free(lease, self.settings.identity, self.observed, self._clock()):
            return False
        ours = lease.spec.holder_identity == self.settings.identity
        transitions = (lease.spec.lease_transitions or 0) + (0 if ours else 1)
        acquired = lease.spec.acquire_time if ours and lease.spec.acquire_time else now
        lease.spec = self._spec(now, transitions, acquired)
        return await self._write(
            self.coordination.replace_namespaced_lease(self.settings.name, self.settings.namespace, lease), lease.spec
        )

    async def _renew_held(self, lease: client.V1Lease) -> bool:
        """Replace the Lease we last wrote, unread; False when someone wrote it since (the caller reads it)."""
        spec = lease.spec
        renewed = client.V1Lease(
            metadata=lease.metadata,
            spec=self._spec(_now(), spec.lease_transitions or 0, spec.acquire_time or _now()),
        )
        request = self.coordination.replace_namespaced_lease(self.settings.name, self.settings.namespace, renewed)
        if await self._write(request, renewed.spec):
            return True
        self.held = None
        return False

    async def _write(self, request: Awaitable, spec: client.V1LeaseSpec) -> bool:
        """Send a create or replace; on success the record we wrote is the one we last observed."""
        try:
            written = await request
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        self.observed = Observation(lease_record(spec), self._clock())
        self.held = written if isinstance(written, client.V1Lease) else None
        return True

    async def run(self, on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None]) -> None:
        """Acquire, then renew until the Lease is lost; callbacks mark the edges."""
        while not self.is_leader:
            started = self._clock()
            if await self._attempt(self.settings.renew_deadline):
                self.is_leader = True
                self._renewed(started)
                logger.info(
                    "became the leader (lease %s/%s, identity %s)",
                    self.settings.namespace,
                    self.settings.name,
                    self.settings.identity,
                )
                on_started_leading()
            else:
                await asyncio.sleep(next_attempt_in(self.observed, self.settings.retry_period, self._clock()))
        await self._renew_until_lost(started)
        self.is_leader = False
        if self._ended.acquire(blocking=False):
            logger.error("lost the leader lease %s/%s", self.settings.namespace, self.settings.name)
            on_stopped_leading()

    def _renewed(self, started: float) -> None:
        if self._deadline is not None:
            self._deadline.renewed(started)

    def _missed(self) -> None:
        """The deadline's thread: the loop has not recorded a renewal in time (nor noticed that it has not)."""
        if self._ended.acquire(blocking=False) and self._on_deadline_missed is not None:
            logger.error("lost the leader lease %s/%s", self.settings.namespace, self.settings.name)
            self._on_deadline_missed()

    async def _renew_until_lost(self, last_renewal: float) -> None:
        """Renew every retry_period; return once no renewal completed within renew_deadline of the last one.

        The deadline counts from the *start* of the last successful attempt (the renewTime we wrote is no older),
        and each attempt only gets the time left until it, so a hung request ends leadership on time.
        """
        while True:
            deadline = last_renewal + self.settings.renew_deadline
            await asyncio.sleep(max(0.0, min(self.settings.retry_period, deadline - self._clock())))
            started = self._clock()
            if started >= deadline:
                return
            if await self._attempt(deadline - started):
                last_renewal = started
                self._renewed(started)

    async def _attempt(self, budget: float) -> bool:
        """One acquire or renew, abandoned after `budget` seconds: a hung request must not outlast the deadline."""
        try:
            async with asyncio.timeout(budget):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            logger.warning("lease %s/%s: no answer within %.1fs", self.settings.namespace, self.settings.name, budget)
            return False
        except (ApiException, OSError, aiohttp.ClientError) as error:
            # ClientError: e.g. a connection the API server closed mid-request (ServerDisconnectedError is no
            # OSError). Every failure is one failed attempt: one that ended this task would stop the renewals and
            # leave the replica reconciling on a Lease that expires under it.
            logger.warning("lease %s/%s: %s", self.settings.namespace, self.settings.name, one_line(error))
            return False
        except Exception:
            logger.exception("lease %s/%s: attempt failed", self.settings.namespace, self.settings.name)
            return False

    async def release(self) -> None:
        """On a clean shutdown, hand over at once instead of making standbys wait for expiry."""
        if not self.is_leader:
            return
        try:
            async with asyncio.timeout(self.settings.renew_deadline):  # a hung release must not block shutdown
                lease = await self.coordination.read_namespaced_lease(self.settings.name, self.settings.namespace)
                if lease.spec.holder_identity == self.settings.identity:
                    lease.spec.holder_identity = None
                    lease.spec.renew_time = None
                    await self.coordination.replace_namespaced_lease(self.settings.name, self.settings.namespace, lease)
                    logger.info("released the leader lease %s/%s", self.settings.namespace, self.settings.name)
        except (TimeoutError, ApiException, OSError) as error:
            logger.warning("could not release the lease: %s", getattr(error, "reason", None) or repr(error))
        self.is_leader = False
        self.held = None
        if self._deadline is not None:
            self._deadline.stop()
