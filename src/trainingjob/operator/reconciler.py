"""Feeds the pure planner from the Kopf indexes and applies its plan; one job at a time per key."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.operator.apply import Applier
from trainingjob.operator.workqueue import WorkQueue
from trainingjob.reconcile.observed import ObservedChildren
from trainingjob.reconcile.planner import plan

logger = logging.getLogger(__name__)
JobKey = tuple[str, str]
ERROR_BACKOFF_BASE = 1.0
ERROR_BACKOFF_MAX = 300.0


def _values(index: Mapping[Any, Any], key: JobKey) -> list[Any]:
    store = index.get(key)
    return list(store) if store is not None else []


class Reconciler:
    """Owns the work queue and a bounded pool of workers; holds per-job memory only while the job exists."""

    def __init__(
        self,
        indexes: Mapping[str, Mapping[Any, Any]],
        applier: Applier,
        config: OperatorConfig,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.indexes = indexes
        self.applier = applier
        self.config = config
        self.queue = WorkQueue()
        self.clock = clock or (lambda: datetime.datetime.now(datetime.UTC))
        self.rejections: dict[JobKey, list[str]] = {}
        self.failures: dict[JobKey, int] = {}
        self.tasks: list[asyncio.Task] = []

    def enqueue(self, key: JobKey) -> None:
        self.queue.add(key)

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._worker(), name=f"reconcile-worker-{i}")
            for i in range(self.config.max_concurrent_reconciles)
        ]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
                self.failures.pop(key, None)
            except asyncio.CancelledError:
                raise
            except Exception:
                attempts = self.failures[key] = self.failures.get(key, 0) + 1
                delay = min(ERROR_BACKOFF_BASE * 2 ** (attempts - 1), ERROR_BACKOFF_MAX)
                logger.exception("reconcile of %s/%s failed (attempt %d); retrying in %.0fs", *key, attempts, delay)
                self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)

    def job_body(self, key: JobKey) -> Mapping[str, Any] | None:
        bodies = _values(self.indexes["trainingjob_bodies"], key)
        return bodies[0] if bodies else None

    def observed(self, key: JobKey) -> ObservedChildren:
        return ObservedChildren.from_cache(
            pods=_values(self.indexes["worker_pods"], key),
            services=_values(self.indexes["worker_services"], key),
            config_maps=_values(self.indexes["job_config_maps"], key),
            rejections=self.rejections.get(key, ()),
        )

    async def reconcile(self, key: JobKey) -> None:
        body = self.job_body(key)
        if body is None:
            self.forget(key)
            return
        job = TrainingJob.from_body(body)
        result = plan(job, self.observed(key), self.clock(), self.config)
        outcome = await self.applier.apply(job, body, result)
        if outcome.rejections:
            self.rejections[key] = outcome.rejections
            self.queue.add(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    def forget(self, key: JobKey) -> None:
        """The job is gone: drop everything we kept for it, so memory does not grow with jobs ever seen."""
        self.rejections.pop(key, None)
        self.failures.pop(key, None)
        self.queue.forget(key)
