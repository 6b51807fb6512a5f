"""The order of a sweep's writes (operator/trainingsweep/apply.py), with a writer that only records calls: the
stop mark of a pruned trial is written before the status that counts it Pruned, so no reader sees a sweep finished
while its pruned trial runs, and a stale plan (status refused with 409) creates no trial."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from tests.sweep_support import sweep
from trainingjob.operator.runtime.writer import DONE
from trainingjob.operator.trainingsweep.apply import SweepApplier
from trainingjob.sweeps.builders import stop_patch
from trainingjob.sweeps.planner import SweepPlan, TrialWrite
from trainingjob.sweeps.types import TrainingSweep


class RecordingWriter:
    """Records each write's kind in order; `refuse_status` answers the status patch with 409."""

    def __init__(self, refuse_status: bool = False) -> None:
        self.calls: list[str] = []
        self.refuse_status = refuse_status

    async def patch_object(self, resource: Any, namespace: str, name: str, uid: str, patch: Any) -> Any:
        self.calls.append(f"mark {name}")
        return DONE

    async def patch_status(self, resource: Any, namespace: str, name: str, version: str, patch: Any) -> str:
        self.calls.append("status")
        if self.refuse_status:
            raise ApiException(status=409)
        return "2"

    async def create_object(self, resource: Any, namespace: str, manifest: Any) -> Any:
        self.calls.append(f"create {manifest['metadata']['name']}")
        return DONE

    async def record_event(self, resource: Any, ref: Any, event: Any) -> None:
        self.calls.append("event")


def a_plan() -> tuple[TrainingSweep, SweepPlan]:
    current = sweep()
    plan = SweepPlan(
        status={"phase": "Succeeded", "trialsPruned": 1},
        creates=[{"metadata": {"name": "s-trial-2", "annotations": {}}, "spec": {"hyperparameters": {}}}],
        writes=[TrialWrite("s-trial-1", "uid-1", stop_patch("Pruned at epoch 2"))],
    )
    return current, plan


def apply(writer: RecordingWriter) -> Any:
    current, plan = a_plan()
    body = {"metadata": {"resourceVersion": "1"}}
    return asyncio.run(SweepApplier(writer).apply(current, body, plan))  # type: ignore[arg-type]


def test_the_stop_mark_is_written_before_the_status_that_counts_it() -> None:
    writer = RecordingWriter()
    applied = apply(writer)
    assert writer.calls[:3] == ["mark s-trial-1", "status", "create s-trial-2"], writer.calls
    assert applied.created == ["s-trial-2"] and not applied.stale


def test_a_stale_plan_marks_but_creates_nothing() -> None:
    writer = RecordingWriter(refuse_status=True)
    applied = apply(writer)
    assert writer.calls == ["mark s-trial-1", "status"] and applied.stale
