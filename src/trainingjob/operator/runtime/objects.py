"""The wiring a controller of one kind shares with the others: its Controller built from its Registration, the
clock its planner's `now` comes from, and the start of every reconcile (the object's body from its index, in the
log context of its key, or `forget` when it is gone).

A controller's reconciler extends ObjectReconciler with what is its own: how it reads what it observes, plans and
applies (`reconcile_body`), and what it remembers of an object (`forget` drops it in one line).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from trainingjob.kube.reflector import ObjectKey
from trainingjob.operator.logs import reconcile_context
from trainingjob.operator.runtime.controller import Controller, Registration
from trainingjob.operator.runtime.store import Indexes, IndexName, views

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class ObjectReconciler:
    """A reconciler of one kind keyed by (namespace, name). Subclasses set BODIES (the index of the kind's own
    bodies), REGISTRATION and WORKERS, and implement `reconcile_body` and `forget`."""

    BODIES: IndexName[Mapping[str, Any]]
    REGISTRATION: Registration
    WORKERS: int

    def __init__(
        self, indexes: Indexes, clock: Clock | None = None, resync_seconds: float = 0, metrics: object = None
    ) -> None:
        self.indexes = indexes
        self.clock = clock or utc_now
        self.controller = Controller(self.REGISTRATION, self.reconcile, self.WORKERS, resync_seconds, metrics)

    async def reconcile(self, key: Hashable) -> None:
        namespace, name = key  # type: ignore[misc]
        with reconcile_context(namespace, name):
            bodies = views(self.indexes, self.BODIES, key)
            if not bodies:
                self.forget((namespace, name))
                return
            await self.reconcile_body((namespace, name), bodies[0])

    async def reconcile_body(self, key: ObjectKey, body: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def forget(self, key: ObjectKey) -> None:
        """Drop what this process remembers of an object that is gone."""
