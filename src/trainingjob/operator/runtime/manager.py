"""The controllers of one operator process on one set of caches (controller-runtime's Manager, in small).

The watches every controller registers are merged into one set of informers (two controllers reading Services get
one Service informer, with both their indexes); every change goes to each controller that registered for it. No
controller plans before every informer has its first listing: the one "caches synced" barrier (a leader planning
from a half-filled cache once gang-restarted 860 of 1,000 running jobs). Only the leader runs the workers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Sequence

from trainingjob.operator.runtime.controller import Controller, Registration
from trainingjob.operator.runtime.informers import Caches, Watch, merged
from trainingjob.operator.runtime.store import Touched

logger = logging.getLogger(__name__)


def all_watches(registrations: Sequence[Registration]) -> tuple[Watch, ...]:
    """Every controller's watches, one per resource and label selector."""
    return merged(watch for registration in registrations for watch in registration.owns)


class Manager:
    def __init__(self, caches: Caches, controllers: Sequence[Controller]) -> None:
        self.caches = caches
        self.controllers = list(controllers)
        self.leading = False
        for controller in self.controllers:
            controller.indexes = caches.indexes
            missing = set(controller.triggers) - set(caches.indexes)
            assert not missing, f"{controller.kind} registers for indexes nobody fills: {sorted(missing)}"
        caches.on_change = self.route

    def route(self, touched: Touched) -> None:
        for controller in self.controllers:
            controller.route(touched)

    async def open_barrier(self) -> None:
        """Let the workers plan once every informer holds its first listing."""
        started = asyncio.get_running_loop().time()
        await self.caches.wait_synced()
        took = asyncio.get_running_loop().time() - started
        logger.info("caches synced in %.1fs: %d objects", took, self.caches.object_count())
        for controller in self.controllers:
            controller.synced.set()

    def start(self) -> None:
        """Run every controller's workers (without leader election: a single replica)."""
        self.leading = True
        for controller in self.controllers:
            controller.start()

    def start_leading(self) -> None:
        """Leadership acquired: start the workers and look at every known object once (events seen as a standby
        were queued too, but a fresh look at all of them is what makes a takeover level-triggered)."""
        self.start()
        for controller in self.controllers:
            controller.enqueue_all()

    async def stop(self) -> None:
        await asyncio.gather(*(controller.stop() for controller in self.controllers))
        logger.info("reconcilers stopped")

    @property
    def tasks(self) -> list[asyncio.Task]:
        return [task for controller in self.controllers for task in controller.tasks]

    def queue_depth(self) -> int:
        return sum(len(controller.queue) for controller in self.controllers)

    def longest_reconcile(self) -> tuple[str, Hashable, float] | None:
        """(kind, key, seconds) of the reconcile that has run longest (None: none in flight)."""
        running = [
            (controller.kind, *longest)
            for controller in self.controllers
            if (longest := controller.longest_reconcile()) is not None
        ]
        return max(running, key=lambda item: item[2]) if running else None
