"""A controller: what it reconciles, owns and watches (controller-runtime's For / Owns / Watches, as data), its own
rate-limited work queue and a bounded pool of workers that run its reconcile, one key at a time.

A controller package (operator/trainingjob/, operator/llmmodel/) gives a Registration and a reconcile function;
the Manager (manager.py) merges every controller's watches into one set of informers and hands each controller the
changes it registered for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.kube.reflector import Resource, describe
from trainingjob.kube.status import unavailable
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.queue import WorkQueue
from trainingjob.operator.runtime.store import Indexes, Touched
from trainingjob.operator.runtime.writer import AdmissionRefused

logger = logging.getLogger(__name__)
Key = Hashable
# From a changed key of another controller's index to the keys of this controller it concerns (Watches).
Mapper = Callable[[Indexes, Key], Iterable[Key]]


@dataclass(frozen=True)
class Registration:
    """What a controller reconciles (`kind`, whose objects' bodies `primary` indexes), the resources it lists and
    watches for itself (`owns`: its own kind and its children, indexed by its keys, so a change enqueues the key),
    other indexes whose changes concern it (`watches`, with the mapping to its keys) and indexes of its own that
    only answer lookups (`lookups`: their changes enqueue nothing)."""

    kind: Resource
    primary: str
    owns: tuple[Watch, ...]
    watches: tuple[tuple[str, Mapper], ...] = ()
    lookups: frozenset[str] = frozenset()

    def triggers(self) -> dict[str, Mapper | None]:
        """Index name -> how its changed keys become this controller's keys (None: they are its keys)."""
        own: dict[str, Mapper | None] = {
            name: None for watch in self.owns for name in [*watch.indexes, *watch.departures]
        }
        for name in self.lookups:
            own.pop(name, None)
        return {**own, **dict(self.watches)}


class Controller:
    """The work of one kind: a queue of its keys and `workers` reconciling them; nothing runs before `synced`."""

    def __init__(
        self,
        registration: Registration,
        reconcile: Callable[[Key], Awaitable[None]],
        workers: int,
        resync_seconds: float = 0,
        metrics: Any = None,
    ) -> None:
        self.registration = registration
        self.kind = registration.kind.kind
        self.reconcile = reconcile
        self.workers = workers
        self.resync_seconds = resync_seconds
        self.metrics = metrics
        self.triggers = registration.triggers()
        self.queue = WorkQueue()
        self.synced = asyncio.Event()
        self.indexes: Indexes = {}
        self.tasks: list[asyncio.Task] = []
        # Since when each worker has been in its current reconcile (monotonic), read by the liveness probe.
        self.in_flight: dict[Key, float] = {}

    @property
    def running(self) -> bool:
        return bool(self.tasks)

    def route(self, touched: Touched) -> None:
        """Enqueue the keys the changed (index, key) pairs concern."""
        for index, key in touched:
            if index not in self.triggers:
                continue
            mapper = self.triggers[index]
            if mapper is None:
                self.queue.add(key)
            else:
                for concerned in mapper(self.indexes, key):
                    self.queue.add(concerned)

    def keys(self) -> list[Key]:
        """Every object of its kind in the cache."""
        return list(self.indexes.get(self.registration.primary) or ())

    def enqueue_all(self) -> None:
        for key in self.keys():
            self.queue.add(key)

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._worker(), name=f"{self.kind} reconcile worker {i}") for i in range(self.workers)
        ]
        if self.resync_seconds:
            self.tasks.append(asyncio.create_task(self._resync(self.resync_seconds), name=f"{self.kind} resync"))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _resync(self, period: float) -> None:
        """Reconcile every cached object again each `period` seconds, whether or not an event came: a missed event
        or a lost timer then delays a decision by one period at most. One with nothing to do costs no API call."""
        while True:
            await asyncio.sleep(period)
            self.enqueue_all()

    async def _worker(self) -> None:
        await self.synced.wait()
        while True:
            key = await self.queue.get()
            started = self.in_flight[key] = time.monotonic()
            try:
                await self.reconcile(key)
                self.queue.succeeded(key)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if self.metrics is not None:
                    self.metrics.reconcile_errors.labels(type(error).__name__).inc()
                attempts, delay = self.queue.retry(key)
                what = "/".join(str(part) for part in key) if isinstance(key, tuple) else str(key)
                if unavailable(error):
                    logger.warning(
                        "reconcile of %s %s failed (attempt %d), the API server did not answer: %s; retrying in %.0fs",
                        *(self.kind, what, attempts, describe(error), delay),
                    )
                elif isinstance(error, AdmissionRefused):  # for now (quota, a webhook): expected, retried
                    logger.warning(
                        "reconcile of %s %s: admission refused a child for now: %s; retrying in %.0fs",
                        *(self.kind, what, error, delay),
                    )
                elif isinstance(error, ApiException):  # a refusal: the API server's words say it all
                    logger.error(
                        "reconcile of %s %s failed (attempt %d), the API server refused: %s; retrying in %.0fs",
                        *(self.kind, what, attempts, describe(error), delay),
                    )
                else:
                    logger.exception(
                        "reconcile of %s %s failed (attempt %d); retrying in %.0fs", self.kind, what, attempts, delay
                    )
            finally:
                self.in_flight.pop(key, None)
                self.queue.done(key)
                if self.metrics is not None:
                    self.metrics.reconcile_duration.observe(time.monotonic() - started)
                    self.metrics.reconciles.labels(self.kind).inc()

    def longest_reconcile(self) -> tuple[Key, float] | None:
        """The key whose reconcile has run longest and for how many seconds (None: no reconcile in flight)."""
        if not self.in_flight:
            return None
        key, started = min(self.in_flight.items(), key=lambda item: item[1])
        return key, time.monotonic() - started
