"""Leader election on a coordination.k8s.io Lease, so several replicas can run and only one reconciles.

Kopf's peering pauses operators but is not leader election; this is client-go's algorithm in small: a replica
acquires the Lease when it is free or expired, renews it every `retry_period`, and a standby takes over once the
holder has not renewed for `lease_duration`. Standbys keep their watches and indexes warm, so a takeover starts
reconciling at once. A leader that cannot renew within `renew_deadline` stops the process: continuing could let
two replicas write at the same time.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

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


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def lease_is_free(lease: client.V1Lease, identity: str, now: datetime.datetime) -> bool:
    """Ours, unheld, or not renewed for its whole duration."""
    spec = lease.spec
    if not spec.holder_identity or spec.holder_identity == identity:
        return True
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None:
        return True
    return (now - renewed).total_seconds() > (spec.lease_duration_seconds or 0)


class LeaderElector:
    def __init__(self, api: client.ApiClient, settings: LeaseSettings) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.settings = settings.with_identity()
        self.is_leader = False

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
        now = _now()
        try:
            lease = await self.coordination.read_namespaced_lease(self.settings.name, self.settings.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            body = client.V1Lease(metadata=client.V1ObjectMeta(name=self.settings.name), spec=self._spec(now, 0, now))
            return await self._write(self.coordination.create_namespaced_lease(self.settings.namespace, body))
        if not lease_is_free(lease, self.settings.identity, now):
            return False
        ours = lease.spec.holder_identity == self.settings.identity
        transitions = (lease.spec.lease_transitions or 0) + (0 if ours else 1)
        acquired = lease.spec.acquire_time if ours and lease.spec.acquire_time else now
        lease.spec = self._spec(now, transitions, acquired)
        return await self._write(
            self.coordination.replace_namespaced_lease(self.settings.name, self.settings.namespace, lease)
        )

    @staticmethod
    async def _write(request: Awaitable) -> bool:
        try:
            await request
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    async def run(self, on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None]) -> None:
        """Acquire, then renew until the Lease is lost; callbacks mark the edges."""
        while not self.is_leader:
            if await self._attempt():
                self.is_leader = True
                logger.info(
                    "became the leader (lease %s/%s, identity %s)",
                    self.settings.namespace,
                    self.settings.name,
                    self.settings.identity,
                )
                on_started_leading()
            else:
                await asyncio.sleep(self.settings.retry_period)
        last_renewal = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.settings.retry_period)
            if await self._attempt():
                last_renewal = asyncio.get_running_loop().time()
            elif asyncio.get_running_loop().time() - last_renewal > self.settings.renew_deadline:
                self.is_leader = False
                logger.error("lost the leader lease %s/%s", self.settings.namespace, self.settings.name)
                on_stopped_leading()
                return

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except (TimeoutError, ApiException, OSError) as error:
            logger.warning("lease %s/%s: %s", self.settings.namespace, self.settings.name, error)
            return False

    async def release(self) -> None:
        """On a clean shutdown, hand over at once instead of making standbys wait for expiry."""
        if not self.is_leader:
            return
        try:
            lease = await self.coordination.read_namespaced_lease(self.settings.name, self.settings.namespace)
            if lease.spec.holder_identity == self.settings.identity:
                lease.spec.holder_identity = None
                lease.spec.renew_time = None
                await self.coordination.replace_namespaced_lease(self.settings.name, self.settings.namespace, lease)
        except ApiException as error:
            logger.warning("could not release the lease: %s", error.reason)
        self.is_leader = False
