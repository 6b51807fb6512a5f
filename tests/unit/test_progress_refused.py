"""A progress report whose status the API server refuses must not freeze the job (issue 41, finding 3).

Before: two accepted reports with different sets of 32 metric names merged into 64, an epoch of 10**30 went
through; the status write got 422, the pending report was kept and sent again with every reconcile, so a worker
that completed never ended the job. Now what reports hold stays within the schema, and a report whose status is
refused all the same is dropped with a Warning Event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from tests.unit.fake_api import FakeApiServer, fake_applier
from tests.unit.test_apply import CONFIG, KEY, NS, FakeClock, job_body, settle, stray_worker
from tests.unit.test_planner import NOW
from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.progress.report import MAX_COUNT, MAX_METRICS, Report

RECEIVED = "2026-11-22T12:00:00Z"


def beyond_the_schema(status: Mapping[str, Any]) -> str | None:
    """What the real API server refuses in a progress write: more metrics than maxProperties, counts past int64."""
    details = status.get("progressDetails") or {}
    metrics = {**(status.get("metrics") or {}), **(details.get("metrics") or {})}
    if len(metrics) > MAX_METRICS:
        return f"status.metrics: Too many: {len(metrics)}: must have at most {MAX_METRICS} items"
    counts = [status.get("currentEpoch"), *(details.get(key) for key in ("epoch", "step"))]
    if any(isinstance(count, int) and count > MAX_COUNT for count in counts):
        return "status.currentEpoch: Invalid value: must be of type integer"
    return None


def running(server: FakeApiServer, clock: FakeClock) -> Reconciler:
    server.add_job(job_body({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}))
    stray_worker(server, 0, {"phase": "Running"})
    stray_worker(server, 1, {"phase": "Running"})
    server.invalid_status = beyond_the_schema
    return Reconciler(
        server.indexes(NS), fake_applier(server), CONFIG, clock=lambda: NOW, monotonic=clock, metrics=OperatorMetrics()
    )


def metrics(prefix: str) -> dict[str, float]:
    return {f"{prefix}{index}": float(index) for index in range(MAX_METRICS)}


def test_reports_with_different_metric_names_merge_into_a_status_the_schema_holds() -> None:
    async def scenario() -> None:
        server, clock = FakeApiServer(), FakeClock()
        reconciler = running(server, clock)
        await settle(reconciler, server)
        reconciler.report_progress(KEY, Report(epoch=1, metrics=metrics("a"), received=RECEIVED))
        await settle(reconciler, server, rounds=2)
        reconciler.report_progress(KEY, Report(epoch=2, metrics=metrics("b"), received=RECEIVED))
        reconciler.report_progress(KEY, Report(epoch=3, metrics={"loss": 0.5}, received=RECEIVED))
        clock.now += 10
        await settle(reconciler, server, rounds=2)
        written = server.jobs["job"]["status"]["progress"]
        assert written["epoch"] == 3 and len(written["metrics"]) == MAX_METRICS
        assert written["metrics"]["loss"] == 0.5 and "b31" in written["metrics"], "the newest names are kept"
        assert not any(name.startswith("a") for name in written["metrics"])
        assert "ProgressReportDropped" not in server.events

    asyncio.run(scenario())


def test_a_report_whose_status_is_refused_is_dropped_and_the_job_still_finishes() -> None:
    async def scenario() -> None:
        server, clock = FakeApiServer(), FakeClock()
        reconciler = running(server, clock)
        await settle(reconciler, server)
        reconciler.report_progress(KEY, Report(epoch=10**30, received=RECEIVED))  # past what parse_report lets in
        for name in ("job-worker-0", "job-worker-1"):
            server.pods[name]["status"] = {"phase": "Succeeded"}
        await settle(reconciler, server, rounds=3)
        assert server.jobs["job"]["status"]["phase"] == "Succeeded"
        assert server.events.count("ProgressReportDropped") == 1
        assert reconciler.memory[KEY].progress.report is None
        assert reconciler.metrics is not None and reconciler.metrics.progress_dropped._value.get() == 1

    asyncio.run(scenario())


def test_a_refusal_without_a_pending_report_is_still_an_error() -> None:
    """Only a report is dropped for a 422: a status the operator itself got wrong must show as a failing
    reconcile (with its backoff and metric), not disappear."""

    async def scenario() -> None:
        server, clock = FakeApiServer(), FakeClock()
        reconciler = running(server, clock)
        server.invalid_status = lambda status: "status.phase: Unsupported value"
        try:
            await reconciler.reconcile(KEY)
        except Exception as error:
            assert getattr(error, "status", None) == 422
        else:
            raise AssertionError("a refused status write without a report must raise")
        assert "ProgressReportDropped" not in server.events

    asyncio.run(scenario())
