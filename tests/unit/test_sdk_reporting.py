"""trainingjob.sdk progress reports against a real local HTTPS endpoint: path, token, body, retries, 429, throttle.

No Kubernetes: the endpoint is an http.server on 127.0.0.1 with a throwaway CA; the clock and sleep are fakes, so
nothing here waits for real. Reports are sent by the reporter's background thread, so a test that looks at what
the endpoint received first waits for that thread (``reporter.wait()``).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from tests.sdk_server import PATH, FakeClock, Pki, ProgressEndpoint, job_env, sdk_warnings
from trainingjob import sdk
from trainingjob.sdk import ProgressReporter


def test_outside_a_job_every_call_is_a_quiet_no_op(caplog: pytest.LogCaptureFixture) -> None:
    """A script run on a laptop: nothing is sent, nothing is warned about, and flush() has nothing to deliver (so a
    script's "final report not accepted" warning stays quiet too)."""

    class ExplodingOpener:
        def open(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("nothing may be sent outside a TrainingJob")

    reporter = ProgressReporter(env={"TRAININGJOB_WORKER_INDEX": "0"}, opener=ExplodingOpener())
    assert not reporter.enabled
    assert reporter.report_progress(epoch=1, loss=0.5) is False
    assert reporter.report_progress(epoch=2, metrics={"loss": 0.4}) is False
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000002", epoch=2) is False
    assert reporter.report_stop() is False
    assert reporter.flush() is True
    assert sdk_warnings(caplog) == []


def test_a_job_that_names_an_endpoint_but_not_itself_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    reporter = ProgressReporter(env={"TRAININGJOB_PROGRESS_URL": "https://progress:8443"})
    assert reporter.report_progress(epoch=1) is False
    assert reporter.report_progress(epoch=2) is False
    assert sdk_warnings(caplog) == [
        "trainingjob.sdk: TRAININGJOB_NAME/TRAININGJOB_NAMESPACE unset; progress reports are ignored"
    ]


def test_module_functions_outside_a_job_stay_quiet(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("TRAININGJOB_PROGRESS_URL", raising=False)
    sdk.set_default_reporter(None)
    try:
        assert sdk.report_progress(epoch=1, loss=0.1) is False
        assert sdk.report_checkpoint("ckpt", epoch=1) is False
        assert sdk.report_progress(epoch=2, loss=0.05) is False
        assert sdk.flush() is True
        assert sdk.get_reporter() is sdk.get_reporter()
    finally:
        sdk.set_default_reporter(None)
    assert sdk_warnings(caplog) == []


def test_report_is_posted_with_path_token_and_body(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, token_file: Path, clock: FakeClock
) -> None:
    assert reporter.report_progress(
        epoch=3, total_epochs=10, step=1200, total_steps=4000, metrics={"loss": 0.41}, accuracy=0.87
    )
    assert reporter.wait()
    (request,) = endpoint.received
    assert request.method == "POST"
    assert request.path == PATH
    assert request.headers["authorization"] == "Bearer token-1"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "worker": 0,
        "epoch": 3,
        "totalEpochs": 10,
        "step": 1200,
        "totalSteps": 4000,
        "metrics": {"loss": 0.41, "accuracy": 0.87},
    }

    token_file.write_text("token-2")  # the kubelet rotated the projected token
    clock.advance(5)
    assert reporter.report_progress(epoch=4)
    assert reporter.flush() is True  # everything reported has been accepted
    assert endpoint.received[-1].headers["authorization"] == "Bearer token-2"
    assert endpoint.received[-1].json() == {"worker": 0, "epoch": 4}


def test_reports_carry_this_workers_index(
    endpoint: ProgressEndpoint, pki: Pki, token_file: Path, clock: FakeClock
) -> None:
    reporter = ProgressReporter(env=job_env(endpoint.url + "/", pki, token_file, worker="3"), clock=clock)
    assert reporter.report_checkpoint(Path("/checkpoints/ckpt-00000001"), epoch=1, step=50)
    assert reporter.wait()
    (request,) = endpoint.received
    assert request.path == PATH
    assert request.json() == {"worker": 3, "checkpoint": {"epoch": 1, "step": 50, "path": "/checkpoints/ckpt-00000001"}}


def test_throttle_sends_at_most_one_report_per_interval_but_checkpoints_always(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, clock: FakeClock
) -> None:
    sent_at = []
    for step in range(100):  # a report every 0.1 s for 10 s
        if reporter.report_progress(step=step):
            sent_at.append(clock.now)
        clock.advance(0.1)
    assert 4 <= len(sent_at) <= 6
    assert all(b - a >= 2.0 - 1e-9 for a, b in itertools.pairwise(sent_at))

    clock.advance(5)
    assert reporter.report_progress(step=100) is True
    assert reporter.wait()
    before = len(endpoint.received)
    assert reporter.report_progress(step=101) is False  # inside the window
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000000-000000000100", epoch=0, step=100) is True
    assert reporter.wait()
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000000-000000000101", epoch=0, step=101) is True
    assert reporter.wait()
    assert len(endpoint.received) == before + 2


def test_flush_sends_the_newest_throttled_report_once(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, clock: FakeClock
) -> None:
    assert reporter.flush() is False  # nothing reported yet
    assert reporter.report_progress(step=1) is True
    assert reporter.wait()  # else step 3 would replace step 1 still waiting for the sender (newest wins)
    clock.advance(0.5)
    assert reporter.report_progress(step=2, loss=0.9) is False
    clock.advance(0.5)
    assert reporter.report_progress(step=3, loss=0.8) is False
    assert reporter.flush() is True
    assert reporter.flush() is True  # nothing left to send: nothing sent again
    assert [r.json().get("step") for r in endpoint.received] == [1, 3]
    assert endpoint.received[-1].json()["metrics"] == {"loss": 0.8}


def test_invalid_values_are_dropped_with_one_warning_and_never_raise(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    class Exploding:
        def __float__(self) -> float:
            raise RuntimeError("a tensor with 3 elements cannot be converted to a scalar")

    sent = reporter.report_progress(
        epoch=5,
        total_epochs=3,
        step=-1,
        metrics={"loss": math.nan, "bad name": 1.0, "acc": 0.9, "flag": True, "tensor": Exploding()},
        lr=math.inf,
        samples=128,
    )
    assert sent is True
    assert reporter.wait()
    assert endpoint.received[-1].json() == {"worker": 0, "epoch": 5, "metrics": {"acc": 0.9, "samples": 128}}
    (warning,) = sdk_warnings(caplog)
    for name in ("totalEpochs", "step", "loss", "'bad name'", "flag", "tensor", "lr"):
        assert name in warning

    caplog.clear()
    clock.advance(5)
    assert reporter.report_progress(epoch=6, metrics={"loss": math.nan}) is True  # the same kind again: no warning
    assert sdk_warnings(caplog) == []

    clock.advance(5)
    assert reporter.report_progress(epoch=object(), metrics="loss=0.3") is False  # nothing valid left: not sent
    assert reporter.report_progress(metrics={f"m{i}": i for i in range(40)}) is True
    assert reporter.wait()
    assert len(endpoint.received[-1].json()["metrics"]) == 32
    assert reporter.report_checkpoint("") is False


def test_module_functions_use_the_default_reporter(reporter: ProgressReporter, endpoint: ProgressEndpoint) -> None:
    sdk.set_default_reporter(reporter)
    try:
        assert sdk.report_progress(epoch=1, loss=0.5) is True
        assert reporter.wait()
        assert sdk.report_checkpoint("/checkpoints/ckpt-00000001", epoch=1) is True
        assert sdk.flush() is True
    finally:
        sdk.set_default_reporter(None)
    assert [sorted(r.json()) for r in endpoint.received] == [
        ["epoch", "metrics", "worker"],
        ["checkpoint", "worker"],
    ]
