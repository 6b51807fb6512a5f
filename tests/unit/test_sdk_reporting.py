"""trainingjob.sdk progress reports against a real local HTTPS endpoint: path, token, body, retries, 429, throttle.

No Kubernetes: the endpoint is an http.server on 127.0.0.1 with a throwaway CA; the clock and sleep are fakes, so
nothing here waits for real. Reports are sent by the reporter's background thread, so a test that looks at what
the endpoint received first waits for that thread (``reporter.wait()``).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from pathlib import Path

import pytest

from tests.sdk_server import Pki, ProgressEndpoint, make_pki, unused_port
from trainingjob import sdk
from trainingjob.sdk import ProgressReporter

PATH = "/v1/namespaces/ml-team/trainingjobs/resnet/progress"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-1\n")
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> list[float]:
    return []


def job_env(url: str, pki: Pki, token_file: Path, worker: str = "0") -> dict[str, str]:
    return {
        "TRAININGJOB_PROGRESS_URL": url,
        "TRAININGJOB_PROGRESS_CA_FILE": str(pki.ca_file),
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token_file),
        "TRAININGJOB_NAME": "resnet",
        "TRAININGJOB_NAMESPACE": "ml-team",
        "TRAININGJOB_WORKER_INDEX": worker,
    }


@pytest.fixture
def reporter(
    endpoint: ProgressEndpoint, pki: Pki, token_file: Path, clock: FakeClock, sleeps: list[float]
) -> ProgressReporter:
    return ProgressReporter(env=job_env(endpoint.url, pki, token_file), clock=clock, sleep=sleeps.append)


def sdk_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trainingjob.sdk" and r.levelno >= logging.WARNING]


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


def test_5xx_is_retried_with_backoff_until_success(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, sleeps: list[float]
) -> None:
    endpoint.answer(503)
    endpoint.answer(502)
    assert reporter.report_progress(step=10) is True
    assert reporter.flush() is True
    assert len(endpoint.received) == 3
    assert sleeps == [0.25, 0.5]
    assert all(r.json() == {"worker": 0, "step": 10} for r in endpoint.received)


def test_400_is_not_retried_and_its_reason_is_logged_once(
    reporter: ProgressReporter,
    endpoint: ProgressEndpoint,
    sleeps: list[float],
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint.answer(400, {"reason": "epoch out of range"})
    endpoint.answer(400, {"reason": "epoch out of range"})
    assert reporter.report_progress(epoch=1) is True  # handed to the sender; the endpoint refuses it there
    assert reporter.flush() is False
    clock.advance(5)
    assert reporter.report_progress(epoch=1) is True
    assert reporter.flush() is False
    assert len(endpoint.received) == 2
    assert sleeps == []
    warnings = sdk_warnings(caplog)
    assert len(warnings) == 1
    assert "HTTP 400" in warnings[0] and "epoch out of range" in warnings[0]


def test_429_retry_after_pauses_reports_and_holds_back_a_checkpoint(
    reporter: ProgressReporter, endpoint: ProgressEndpoint, clock: FakeClock, sleeps: list[float]
) -> None:
    endpoint.answer(429, Retry_After="30")
    assert reporter.report_progress(epoch=1) is True
    assert reporter.flush() is False  # rate-limited, held back
    assert len(endpoint.received) == 1 and sleeps == []

    clock.advance(10)
    assert reporter.report_progress(epoch=2) is False
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000002", epoch=2) is False
    assert reporter.flush() is False  # still paused
    assert len(endpoint.received) == 1

    clock.advance(21)
    assert reporter.report_progress(epoch=3, loss=0.2) is True
    assert reporter.flush() is True
    assert endpoint.received[-1].json() == {
        "worker": 0,
        "epoch": 3,
        "metrics": {"loss": 0.2},
        "checkpoint": {"epoch": 2, "path": "/checkpoints/ckpt-00000002"},
    }


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


def test_unreachable_endpoint_returns_false_quickly_and_pauses(
    pki: Pki, token_file: Path, clock: FakeClock, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"https://127.0.0.1:{unused_port()}"
    reporter = ProgressReporter(env=job_env(url, pki, token_file), clock=clock, sleep=sleeps.append)
    started = time.monotonic()
    assert reporter.report_progress(epoch=1) is True
    assert reporter.flush() is False
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000001", epoch=1) is False  # paused: held back
    assert time.monotonic() - started < 2
    assert sleeps == [0.25, 0.5, 1.0]
    (warning,) = sdk_warnings(caplog)
    assert "4 attempts failed" in warning

    clock.advance(11)  # the pause is over, still down: tried again, quietly
    assert reporter.report_progress(epoch=2) is True
    assert reporter.flush() is False
    assert len(sdk_warnings(caplog)) == 1


def test_checkpoint_held_back_while_down_is_delivered_by_flush(
    endpoint: ProgressEndpoint, pki: Pki, token_file: Path, clock: FakeClock, sleeps: list[float]
) -> None:
    reporter = ProgressReporter(env=job_env(endpoint.url, pki, token_file), clock=clock, sleep=sleeps.append)
    for _ in range(4):
        endpoint.answer(503)
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000007", epoch=7) is True
    assert reporter.wait()
    assert len(endpoint.received) == 4
    clock.advance(reporter.failure_pause + 1)
    assert reporter.flush() is True
    checkpoint = {"epoch": 7, "path": "/checkpoints/ckpt-00000007"}
    assert endpoint.received[-1].json() == {"worker": 0, "checkpoint": checkpoint}


def test_flush_waits_out_a_pause_that_ends_within_its_timeout_and_sends_again(
    endpoint: ProgressEndpoint, pki: Pki, token_file: Path, clock: FakeClock, sleeps: list[float]
) -> None:
    """The final report of a run, met by an endpoint down for a moment (an operator restarting, a network blip):
    flush(timeout) tries again once the pause is over instead of giving up after the first round of retries."""

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(seconds)

    reporter = ProgressReporter(env=job_env(endpoint.url, pki, token_file), clock=clock, sleep=sleep)
    for _ in range(4):
        endpoint.answer(503)
    assert reporter.report_progress(epoch=12, total_epochs=12) is True
    assert reporter.flush(timeout=reporter.failure_pause - 1) is False  # the pause outlasts it: no wait
    assert sleeps == [0.25, 0.5, 1.0] and len(endpoint.received) == 4
    assert reporter.flush(timeout=30) is True
    assert sleeps[3:] == [pytest.approx(reporter.failure_pause)]
    assert endpoint.received[-1].json() == {"worker": 0, "epoch": 12, "totalEpochs": 12}


def test_untrusted_certificate_is_not_retried(
    endpoint: ProgressEndpoint,
    token_file: Path,
    tmp_path: Path,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = make_pki(tmp_path / "other")
    reporter = ProgressReporter(env=job_env(endpoint.url, other, token_file), sleep=sleeps.append)
    assert reporter.report_progress(epoch=1) is True
    assert reporter.flush() is False
    assert sleeps == [] and endpoint.received == []
    assert "certificate" in sdk_warnings(caplog)[0]


def test_missing_token_or_ca_drops_the_report_with_a_warning(
    endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    no_token = ProgressReporter(env=job_env(endpoint.url, pki, tmp_path / "absent"))
    assert no_token.report_progress(epoch=1) is True
    assert no_token.flush() is False
    env = job_env(endpoint.url, pki, tmp_path / "absent")
    env["TRAININGJOB_PROGRESS_CA_FILE"] = str(tmp_path / "no-ca.crt")
    no_ca = ProgressReporter(env=env)
    assert no_ca.report_progress(epoch=1) is True
    assert no_ca.flush() is False
    assert endpoint.received == []
    assert len(sdk_warnings(caplog)) == 2


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


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("0.5", 0.5), (None, 5.0), ("", 5.0), ("soon", 5.0), ("-3", 0.0), ("99999", 600.0), ("nan", 5.0)],
)
def test_retry_after_header_values(header: str | None, expected: float) -> None:
    from trainingjob.sdk._transport import retry_after_seconds

    assert retry_after_seconds(header) == expected


def test_retry_after_http_date() -> None:
    from email.utils import formatdate

    from trainingjob.sdk._transport import retry_after_seconds

    assert 50 <= retry_after_seconds(formatdate(time.time() + 60, usegmt=True)) <= 61
