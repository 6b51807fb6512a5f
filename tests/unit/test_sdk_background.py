"""The SDK never blocks the training loop: reports go out on a background thread, newest first, flushed at exit.

The slow endpoint is real (a TCP listener that completes the handshake in the kernel and never answers); the
ordering tests use an opener that blocks until the test lets it go, so nothing depends on timing luck.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainingjob.sdk import ProgressReporter

SRC = Path(__file__).resolve().parents[2] / "src"


def job_env(url: str, token_file: Path) -> dict[str, str]:
    return {
        "TRAININGJOB_PROGRESS_URL": url,
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token_file),
        "TRAININGJOB_NAME": "resnet",
        "TRAININGJOB_NAMESPACE": "ml-team",
        "TRAININGJOB_WORKER_INDEX": "0",
    }


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """Accepts connections (the kernel's backlog does) and never says a word: a blackholed Service."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"


class GatedOpener:
    """Records bodies; the first request blocks until `release` is set, like an endpoint that hangs once."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.entered = threading.Event()

    def open(self, request: Any, data: bytes | None = None, timeout: float = 0) -> Any:
        self.entered.set()
        if not self.bodies:
            self.release.wait(10)
        self.bodies.append(json.loads(request.data))
        return self

    def __enter__(self) -> GatedOpener:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self) -> bytes:
        return b""


def test_a_report_returns_at_once_while_the_endpoint_never_answers(silent_endpoint: str, token_file: Path) -> None:
    clock = [100.0]
    reporter = ProgressReporter(env=job_env(silent_endpoint, token_file), timeout=3.0, clock=lambda: clock[0])
    started = time.monotonic()
    assert reporter.report_progress(epoch=1, loss=0.5) is True
    clock[0] += 5  # past the throttle window: sent again while the first one still hangs
    assert reporter.report_progress(epoch=2, loss=0.4) is True
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000002", epoch=2) is True
    assert time.monotonic() - started < 0.5  # one attempt alone would take the 3 s timeout
    assert reporter.wait(timeout=0.1) is False  # the sender is still stuck on the endpoint
    started = time.monotonic()
    assert reporter.flush(timeout=0.2) is False
    assert time.monotonic() - started < 1.0  # flush is bounded too


def test_newest_waiting_report_wins_and_keeps_a_waiting_checkpoint(token_file: Path) -> None:
    clock = [100.0]
    opener = GatedOpener()
    reporter = ProgressReporter(env=job_env("https://operator:8443", token_file), opener=opener, clock=lambda: clock[0])
    assert reporter.report_progress(step=1) is True
    assert opener.entered.wait(5)  # the sender now hangs on step 1
    for step in (2, 3):
        clock[0] += 5
        assert reporter.report_progress(step=step) is True
    assert reporter.report_checkpoint("/checkpoints/ckpt-00000000-000000000003", epoch=0, step=3) is True
    clock[0] += 5
    assert reporter.report_progress(step=4, loss=0.1) is True
    opener.release.set()
    assert reporter.flush() is True
    assert opener.bodies == [
        {"worker": 0, "step": 1},
        {
            "worker": 0,
            "step": 4,
            "metrics": {"loss": 0.1},
            "checkpoint": {"epoch": 0, "step": 3, "path": "/checkpoints/ckpt-00000000-000000000003"},
        },
    ]


EXIT_SCRIPT = """
import json, sys, time
sys.path.insert(0, {src!r})
from trainingjob.sdk import ProgressReporter

class Opener:
    def open(self, request, data=None, timeout=0):
        print(json.dumps(json.loads(request.data)), flush=True)
        if json.loads(request.data).get("step") == 2:
            time.sleep(60)  # the endpoint hangs on the last report: exit must not wait for it
        return self
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return None
    def read(self):
        return b""

reporter = ProgressReporter(env={env!r}, opener=Opener())
reporter.report_progress(step=1)
reporter.wait()
reporter.report_progress(step=2)  # throttled: held back, and the script never calls flush()
"""


def test_a_held_back_report_is_sent_at_exit_without_delaying_exit_for_long(token_file: Path) -> None:
    script = EXIT_SCRIPT.format(src=str(SRC), env=job_env("https://operator:8443", token_file))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["step"] for line in done.stdout.splitlines()] == [1, 2]
    assert elapsed < 10  # the exit flush gave up after its short bound, not after the endpoint's 60 s


def test_a_checkpoint_right_after_a_progress_report_keeps_the_progress() -> None:
    """report_progress then report_checkpoint before the sender ran: what is sent has both (it used to lose the
    epoch, so a job's status never reached 100 %)."""
    from trainingjob.sdk.reporter import _newer_wins

    progress = (1, {"worker": 0, "epoch": 3, "totalEpochs": 3, "metrics": {"loss": 0.1}})
    checkpoint = (2, {"worker": 0, "checkpoint": {"path": "/c/3", "epoch": 3}})
    number, body = _newer_wins(progress, checkpoint)
    assert number == 2
    assert body == {
        "worker": 0,
        "epoch": 3,
        "totalEpochs": 3,
        "metrics": {"loss": 0.1},
        "checkpoint": checkpoint[1]["checkpoint"],
    }
    newer_progress = (3, {"worker": 0, "epoch": 4, "totalEpochs": 4})
    assert _newer_wins(checkpoint, newer_progress)[1]["checkpoint"] == checkpoint[1]["checkpoint"]
