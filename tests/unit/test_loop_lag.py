"""operator/runtime/loop_lag.py: a step that holds the event loop shows as lag, and the log says so once."""

from __future__ import annotations

import asyncio
import time

import pytest

from trainingjob.operator.metrics import OperatorMetrics
from trainingjob.operator.runtime.loop_lag import watch_loop_lag


async def lags_around_a_blocking_step(block_seconds: float) -> list[float]:
    observed: list[float] = []
    watcher = asyncio.create_task(watch_loop_lag(observed.append, interval=0.05, warn_after=0.2))
    await asyncio.sleep(0.12)  # the watcher is asleep, asked to wake ~0.05 s after it slept
    time.sleep(block_seconds)  # noqa: ASYNC251 - a step that holds the loop: the watcher wakes this much late
    await asyncio.sleep(0.12)
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)
    return observed


def test_a_step_that_holds_the_loop_is_measured_as_lag_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    observed = asyncio.run(lags_around_a_blocking_step(0.4))
    assert max(observed) >= 0.3, observed  # a lower bound: a loaded machine only adds to it
    assert all(lag >= 0 for lag in observed)
    warnings = [r.getMessage() for r in caplog.records if "event loop ran" in r.getMessage()]
    assert len(warnings) == 1 and "short of CPU" in warnings[0], warnings


def test_the_lag_is_exported_as_a_histogram() -> None:
    metrics = OperatorMetrics()
    metrics.event_loop_lag.observe(1.5)
    assert metrics.registry.get_sample_value("trainingjob_event_loop_lag_seconds_count") == 1
    assert metrics.registry.get_sample_value("trainingjob_event_loop_lag_seconds_bucket", {"le": "2.0"}) == 1
    assert metrics.registry.get_sample_value("trainingjob_event_loop_lag_seconds_bucket", {"le": "1.0"}) == 0
