"""runtime/objects.py: the start every kind's reconcile shares. A key whose body the caches hold is reconciled with
that body; a key whose object is gone drops what the reconciler remembers of it (the sweep's memory, here the real
SweepReconciler's), and nothing is planned for it."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

from tests.sweep_support import sweep_body
from trainingjob.kube.reflector import ObjectKey
from trainingjob.operator.runtime.objects import ObjectReconciler
from trainingjob.operator.runtime.store import Index
from trainingjob.operator.trainingsweep.memory import SweepMemory
from trainingjob.operator.trainingsweep.reconciler import SweepReconciler
from trainingjob.operator.trainingsweep.watches import REGISTRATION, SWEEP_BODIES, SWEEP_TRIALS

KEY = ("ns", "digits")  # tests/sweep_support.py's sweep


class Recording(ObjectReconciler):
    BODIES = SWEEP_BODIES
    REGISTRATION = REGISTRATION
    WORKERS = 1

    def __init__(self, indexes: Any) -> None:
        super().__init__(indexes)
        self.reconciled: list[tuple[ObjectKey, Mapping[str, Any]]] = []
        self.forgotten: list[ObjectKey] = []

    async def reconcile_body(self, key: ObjectKey, body: Mapping[str, Any]) -> None:
        self.reconciled.append((key, body))

    def forget(self, key: ObjectKey) -> None:
        self.forgotten.append(key)


def indexes_holding(*bodies: Mapping[str, Any]) -> dict[str, Index]:
    indexes: dict[str, Index] = {SWEEP_BODIES: Index(), SWEEP_TRIALS: Index()}
    for body in bodies:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        indexes[SWEEP_BODIES].put(key, key, body)
    return indexes


def test_a_cached_object_is_reconciled_with_its_body_and_a_gone_one_forgotten() -> None:
    body = sweep_body()
    reconciler = Recording(indexes_holding(body))
    asyncio.run(reconciler.reconcile(KEY))
    asyncio.run(reconciler.reconcile(("ns", "gone")))
    assert reconciler.reconciled == [(KEY, body)]
    assert reconciler.forgotten == [("ns", "gone")]
    assert reconciler.controller.kind == REGISTRATION.kind.kind
    assert reconciler.clock().tzinfo is datetime.UTC


def test_a_deleted_sweep_leaves_no_memory_behind() -> None:
    reconciler = SweepReconciler(indexes_holding(), applier=None, engine=lambda: None)  # type: ignore[arg-type]
    reconciler.memory[KEY] = SweepMemory(uid="uid-1")
    asyncio.run(reconciler.reconcile(KEY))
    assert reconciler.memory == {}
