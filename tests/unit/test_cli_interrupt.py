"""Ctrl-C ends a `tj` command: cancelled cleanly, or after a grace period when the cancellation is not honoured.

Each case runs `plumbing.run` in a real child process and sends it a real SIGINT (no API server involved)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from trainingjob.cli.plumbing import INTERRUPTED_EXIT

# The child lowers the grace period so the stubborn case ends quickly; "ready" means the handler is installed.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from trainingjob.cli import plumbing
    plumbing.INTERRUPT_GRACE_SECONDS = 1.0

    async def command(stubborn: bool) -> int:
        print("ready", flush=True)
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not stubborn:
                    print("cleaned up", flush=True)
                    raise

    plumbing.run(command(sys.argv[1] == "stubborn"))
    """
)


def interrupted(kind: str) -> tuple[int, str, str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=15)
    finally:
        child.kill()
    return child.returncode, out, err


def test_ctrl_c_cancels_the_command_which_cleans_up_and_exits_130() -> None:
    code, out, err = interrupted("polite")
    assert code == INTERRUPTED_EXIT and "cleaned up" in out, err
    assert "did not finish" not in err


def test_ctrl_c_ends_a_command_that_swallows_the_cancellation() -> None:
    code, _, err = interrupted("stubborn")
    assert code == INTERRUPTED_EXIT, err
    assert "interrupted: cleanup did not finish within 1 s, exiting" in err
