"""trainingjob.sdk progress reports when the endpoint fails them: 5xx retried with backoff, 400 not retried, 429's
Retry-After, an unreachable endpoint or untrusted certificate, a missing token or CA (test_sdk_reporting.py: the
reports themselves).

No Kubernetes: the endpoint is an http.server on 127.0.0.1 with a throwaway CA; the clock and sleep are fakes, so
nothing here waits for real. Reports are sent by the reporter's background thread, so a test that looks at what
the endpoint received first waits for that thread (``reporter.wait()``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.sdk_server import FakeClock, Pki, ProgressEndpoint, job_env, make_pki, sdk_warnings, unused_port
from trainingjob.sdk import ProgressReporter


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
