"""trainingjob.sdk.on_stop: SIGTERM becomes save-a-checkpoint, report it, exit, at the loop's next safe point.

The training programs run as real child processes (a signal handler and an exit are what is tested, and they must
not hit pytest's own process), reporting to a real local HTTPS endpoint (tests/sdk_server.py); the parent sends the
real SIGTERM once the child says where it is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.sdk_server import Pki, ProgressEndpoint
from tests.unit.test_sdk_reporting import FakeClock, job_env
from trainingjob import sdk
from trainingjob.sdk import ProgressReporter
from trainingjob.sdk.stop import EXIT_CODE

SRC = Path(sdk.__file__).parents[2]
TIMEOUT = 60  # seconds a child may take at most; it normally ends within a second of SIGTERM

# A chief: epochs of 50 ms, progress after each; SIGTERM saves the state of the last whole epoch and exits.
CHIEF = """
import logging, sys, time
from trainingjob import sdk
logging.basicConfig(level=logging.INFO)
state = {"epoch": 0}
def save():
    return sdk.save_checkpoint(lambda p: p.write_text(str(state["epoch"])), epoch=state["epoch"], suffix=".txt")
sdk.on_stop(save)
try:
    for epoch in range(1, 100000):
        time.sleep(0.05)
        state["epoch"] = epoch
        print(f"epoch {epoch}", flush=True)
        sdk.report_progress(epoch=epoch, total_epochs=100000)
finally:
    print("unwound", flush=True)
    HANG
"""


def start(program: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(program)],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_after(child: subprocess.Popen[str], line: str) -> tuple[list[str], str]:
    """SIGTERM once the child printed `line`; its stdout lines and stderr once it has exited."""
    assert child.stdout is not None
    seen = []
    for output in child.stdout:
        seen.append(output.strip())
        if output.strip() == line:
            child.send_signal(signal.SIGTERM)
            break
    out, err = child.communicate(timeout=TIMEOUT)
    return seen + out.splitlines(), err


# What the loop's finally block does after the stop: return; never return (a collective's shutdown waiting for
# peers that are gone); never return and hold the GIL (a C call that does not release it), so no Python thread runs.
UNWINDING = {
    "unwinds": ("pass", 143),
    "hangs": ("time.sleep(3600)", 143),
    "holds-the-gil": ("import ctypes; ctypes.PyDLL(None).sleep(3600)", 1),
    # A slow interpreter teardown (PyTorch's on a loaded node): no thread runs during it, so the unwind timer could
    # not end it, and faulthandler's deadline exited 1 at 4 s; the stop now ends before the teardown.
    "slow-teardown": ("sys.slow = type('Slow', (), {'__del__': lambda _, sleep=time.sleep: sleep(30)})()", 143),
}


@pytest.mark.parametrize("unwinding", list(UNWINDING))
def test_sigterm_saves_the_last_whole_epoch_reports_the_stop_and_exits(
    endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path, unwinding: str
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    env = {**job_env(endpoint.url, pki, token), "CHECKPOINT_DIR": str(tmp_path / "run")}
    code, exit_code = UNWINDING[unwinding]
    child = start(CHIEF.replace("HANG", code), env)
    lines, err = stop_after(child, "epoch 3")
    assert child.returncode == exit_code, err  # a hang must not keep the worker until SIGKILL

    stopped = [r.json() for r in endpoint.received if r.json().get("stopped")]
    assert len(stopped) == 1, err
    saved = sdk.latest_checkpoint(tmp_path / "run")
    assert saved is not None and stopped[0]["checkpoint"]["path"] == str(saved)
    epoch = int(saved.read_text())
    assert epoch >= 3 and stopped[0]["checkpoint"]["epoch"] == epoch  # the state of a whole epoch, under its name
    assert lines[-2:] == [f"epoch {epoch}", "unwound"]  # it left at the safe point after that epoch
    assert "SIGTERM received" in err and f"stopped with checkpoint {saved}" in err


def test_the_exit_code_says_the_worker_was_stopped(endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    child = start(CHIEF.replace("HANG", "pass"), {**job_env(endpoint.url, pki, token), "CHECKPOINT_DIR": str(tmp_path)})
    stop_after(child, "epoch 2")
    assert child.returncode == EXIT_CODE == 143  # as if SIGTERM had ended it: a stop, never a success


def test_a_rank_without_a_save_function_neither_saves_nor_reports(tmp_path: Path) -> None:
    """The other ranks: they leave when their collective breaks (here: at once) and report nothing (the endpoint
    takes reports from the chief only)."""
    program = """
    import sys, time
    from trainingjob import sdk
    stop = sdk.on_stop()
    print("training", flush=True)
    while not sdk.stop_requested():
        time.sleep(0.01)
    print("collective broken while stopping", flush=True)
    stop.leave()
    """
    child = start(program, {"CHECKPOINT_DIR": str(tmp_path)})
    lines, err = stop_after(child, "training")
    assert child.returncode == EXIT_CODE, err
    assert lines[-1] == "collective broken while stopping"
    assert not list(tmp_path.iterdir())


def test_the_handler_only_notes_the_request_and_the_loop_leaves_at_its_next_safe_point(
    tmp_path: Path,
) -> None:
    """The handler itself only notes the request: code between two safe points runs to the end."""
    program = """
    import os, signal, time
    from trainingjob import sdk
    sdk.on_stop(lambda: None)
    os.kill(os.getpid(), signal.SIGTERM)
    print("still running after SIGTERM", sdk.stop_requested(), flush=True)
    sdk.report_progress(epoch=1)
    print("never printed", flush=True)
    """
    child = start(program, {"CHECKPOINT_DIR": str(tmp_path)})
    out, err = child.communicate(timeout=TIMEOUT)
    assert (child.returncode, out.splitlines()) == (EXIT_CODE, ["still running after SIGTERM True"]), err
    assert "stopped without a checkpoint" in err


def test_the_stop_report_is_never_throttled_and_carries_the_checkpoint(
    endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    reporter = ProgressReporter(env=job_env(endpoint.url, pki, token), clock=FakeClock(), sleep=lambda _: None)
    assert reporter.report_progress(epoch=1) is True and reporter.wait()
    assert reporter.report_progress(epoch=2) is False  # throttled
    assert reporter.report_stop(tmp_path / "ckpt-00000002", epoch=2) is True
    assert reporter.wait()
    assert endpoint.received[-1].json() == {
        "worker": 0,
        "epoch": 2,  # the throttled report rides along
        "stopped": True,
        "checkpoint": {"epoch": 2, "path": str(tmp_path / "ckpt-00000002")},
    }
    assert reporter.report_stop() is True
    assert reporter.wait()
    assert endpoint.received[-1].json() == {"worker": 0, "stopped": True}


# The main thread blocked in native code that signals do not interrupt (a mutex it already holds: locking it
# again waits forever, and pthread_mutex_lock never returns EINTR), with the GIL released, as a worker blocked in a
# framework's collective is: Python's own handler cannot run there.
# "blocked" is printed (and SIGTERM sent) only once the main thread waits in the futex call (Linux syscall 202).
BLOCKED_IN_NATIVE_CODE = """
import ctypes, threading, time
libc, mutex = ctypes.CDLL(None), ctypes.create_string_buffer(64)  # zeros: PTHREAD_MUTEX_INITIALIZER
main = threading.main_thread().native_id
def tell_once_blocked():
    while open(f"/proc/self/task/{main}/syscall").read().split()[0] != "202":
        time.sleep(0.01)
    print("blocked", flush=True)
threading.Thread(target=tell_once_blocked, daemon=True).start()
libc.pthread_mutex_lock(mutex)
libc.pthread_mutex_lock(mutex)
print("never printed", flush=True)
"""


def test_a_rank_that_saves_nothing_leaves_soon_after_sigterm_even_blocked_in_native_code(tmp_path: Path) -> None:
    """It may never reach a safe point or see its collective fail (an XGBoost allreduce whose peers have gone):
    it leaves `follow_seconds` after SIGTERM, seen by the SDK's own thread, not the main thread's handler."""
    program = "from trainingjob import sdk\nsdk.on_stop(follow_seconds=1)\n" + BLOCKED_IN_NATIVE_CODE
    child = start(program, {"CHECKPOINT_DIR": str(tmp_path)})
    lines, err = stop_after(child, "blocked")
    assert child.returncode == EXIT_CODE, err  # not SIGKILL an hour later
    assert "leaving now: no safe point reached within 1s of the stop" in err
    assert "never printed" not in lines


def test_a_chief_that_cannot_reach_a_safe_point_leaves_before_the_grace_period_ends(
    endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path
) -> None:
    """A chief stuck in its collective saves nothing (its state may be half a step), but it does not wait for
    SIGKILL either: it leaves a second before the grace period (here 3 s) ends, and the stop stays unreported,
    so status.lastStop says the workers saved no checkpoint."""
    token = tmp_path / "token"
    token.write_text("t")
    env = {
        **job_env(endpoint.url, pki, token),
        "CHECKPOINT_DIR": str(tmp_path),
        "TRAININGJOB_GRACE_PERIOD_SECONDS": "3",
    }
    program = "from trainingjob import sdk\nsdk.on_stop(lambda: 1 / 0)\n" + BLOCKED_IN_NATIVE_CODE
    child = start(program, env)
    _, err = stop_after(child, "blocked")
    assert child.returncode == EXIT_CODE, err
    assert "no safe point reached within 2s of the stop" in err
    assert not [r for r in endpoint.received if r.json().get("stopped")]


def test_a_stop_reports_where_the_checkpoint_lives_an_s3_uri_as_it_is(
    endpoint: ProgressEndpoint, pki: Pki, tmp_path: Path
) -> None:
    """A save function that uploads by itself returns the checkpoint's URI: the stop reports that URI (what a
    resume reads), not a local path made of it."""
    token = tmp_path / "token"
    token.write_text("t")
    program = """
    import os, signal
    from trainingjob import sdk
    sdk.on_stop(lambda: "s3://checkpoints/team/run/ckpt-00000002.json")
    os.kill(os.getpid(), signal.SIGTERM)
    sdk.report_progress(epoch=2)
    """
    child = start(program, {**job_env(endpoint.url, pki, token), "CHECKPOINT_DIR": str(tmp_path)})
    _, err = child.communicate(timeout=TIMEOUT)
    assert child.returncode == EXIT_CODE, err
    stopped = [r.json() for r in endpoint.received if r.json().get("stopped")]
    assert [s["checkpoint"] for s in stopped] == [{"epoch": 2, "path": "s3://checkpoints/team/run/ckpt-00000002.json"}]
