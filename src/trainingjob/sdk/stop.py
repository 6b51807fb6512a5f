"""Graceful stop: SIGTERM (suspend, scale, preemption, delete) becomes a request that the training loop honours at
its next safe point, where the process saves a checkpoint, tells the operator, and exits within the grace period.

    sdk.on_stop(lambda: save_checkpoint(model, optimizer, epoch))   # one line, before the training loop

Why a hook at all: the container's first process is PID 1 of its PID namespace, and PID 1 ignores every signal it
has no handler for, so without one SIGTERM does nothing and the worker trains on until SIGKILL ends the grace
period (30 s by default), losing everything since its last checkpoint. With the hook, a suspended job is gone in
seconds and resumes where it stopped.

Why at a safe point and not inside the signal handler: Python runs a handler between any two bytecodes, e.g.
halfway through an optimizer step, and a checkpoint of half-updated weights labelled "epoch 7" would be silently
wrong. A safe point is where the loop's state is whole and the loop says so already: ``report_progress`` (after
an epoch or step), ``save_checkpoint`` (the checkpoint just written is then the stop's, no second save), or
``stop.check()`` where a loop reports nothing.

Why only the chief saves and reports, and the other ranks need nothing but the hook: in a collective (DDP,
XGBoost, JAX) all ranks take each step together. The chief leaves at its first safe point after the signal; the
others go on until their next collective fails because it has gone, and a rank that sees its training fail while
``stop_requested()`` calls ``leave()`` (or ``check()``, which lets the chief save the last whole state first). Were
every rank to leave at its own first safe point, one whose signal came a moment earlier would leave a step before
the chief and break the step the chief is in, and its checkpoint would be lost.

Why a rank that does not save leaves FOLLOW_SECONDS after SIGTERM at the latest, wherever it is: it may never see
its collective fail. Measured with the XGBoost example (3 workers): the kubelet signals pods one by one, so a
worker's allreduce can fail because the chief has gone before that worker's own SIGTERM arrives; its training then
fails like any failure, and XGBoost's shutdown retries the chief's tracker for minutes, where the SIGTERM that comes
next only notes a request nobody looks at again. Another worker sat blocked in an allreduce whose peers had both
gone. Either way it trained on, or waited, until SIGKILL at the end of the grace period. Nothing of it is lost by
leaving: it saves nothing, and the chief has had FOLLOW_SECONDS to reach its safe point (a chief whose collective
breaks first can still save the last whole state, see ``check``). And why every process, the chief too, leaves
MARGIN_SECONDS before the grace period ends: a stop that cannot reach a safe point (a save or a collective that
hangs) exits 143 and says why, instead of waiting for SIGKILL.

Why a stop skips the interpreter's teardown: once the finally blocks and atexit handlers have run, nothing of the
training is left to do, but tearing down a process that imported PyTorch can take seconds on a loaded node, and
during it no Python thread runs any more, so the UNWIND_SECONDS timer cannot end it: faulthandler's deadline did,
with exit code 1 (a failure) instead of 143 (a stop). Measured in the PyTorch example's SIGTERM test at load 6+.
What the teardown would have done that matters is done first: MPI is finalized (mpi4py leaves that to the teardown,
and Open MPI's finalize needs every rank) and logging is flushed; a file the script left open unflushed is not.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from . import _env, _mpi_abort, _s3, _safepoint, _signalwatch
from .checkpoint import parse_checkpoint
from .progress import flush, get_reporter

log = logging.getLogger("trainingjob.sdk")

EXIT_CODE = 128 + signal.SIGTERM  # what the worker would have exited with had SIGTERM ended it: a stop, not success
DEFAULT_GRACE_SECONDS = 30.0  # Kubernetes' default terminationGracePeriodSeconds
UNWIND_SECONDS = 3.0  # after SystemExit, at most this long for finally blocks (a collective's shutdown may hang)
REPORT_SECONDS = 10.0  # at most this long for the stop report to be accepted
MARGIN_SECONDS = 1.0  # leave before SIGKILL by this much
FOLLOW_SECONDS = 5.0  # a rank without a save function leaves at the latest this long after SIGTERM

SaveFunction = Callable[[], object]


class GracefulStop:
    """The stop request of this process and what to do about it; one per process (see on_stop)."""

    def __init__(
        self,
        save: SaveFunction | None = None,
        *,
        exit_code: int = EXIT_CODE,
        grace_seconds: float | None = None,
        follow_seconds: float = FOLLOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.save = save
        self.exit_code = exit_code
        self.grace_seconds = grace_seconds if grace_seconds is not None else _grace_from_env()
        self.follow_seconds = follow_seconds
        self._clock = clock
        self.requested_at: float | None = None
        self._request_lock = threading.Lock()  # the handler and the signal watcher's thread may both request
        self.checkpoint: Path | str | None = None  # what the stop saved, once it has (a path, or an s3:// URI)
        self._leaving = False

    @property
    def requested(self) -> bool:
        """Whether a stop was requested (SIGTERM arrived); a rank stuck in a broken collective can check this to
        tell a stop from a failure."""
        return self.requested_at is not None

    @property
    def deadline_seconds(self) -> float:
        """How long after the request this process leaves at the latest, safe point or not (module docstring):
        the grace period less MARGIN_SECONDS, and for a rank that saves nothing FOLLOW_SECONDS if that is sooner."""
        latest = max(0.0, self.grace_seconds - MARGIN_SECONDS)
        return latest if self.save is not None else min(latest, max(0.0, self.follow_seconds))

    def request(self, signum: int | None = None, _frame: FrameType | None = None) -> None:
        """The signal handler: note the request (once), start the deadline, and return, so the loop carries on to
        its safe point."""
        with self._request_lock:
            if self.requested_at is not None:
                return
            self.requested_at = self._clock()
        name = signal.Signals(signum).name if signum is not None else "a stop"
        deadline = self.deadline_seconds
        log.warning("%s received: stopping at the next safe point (at the latest in %.0fs)", name, deadline)
        _exit_no_later_than(deadline, self.exit_code, f"no safe point reached within {deadline:g}s of the stop")

    def check(self, saved: Path | None = None) -> None:
        """A safe point: if a stop was requested, save (unless `saved` was just written), report, and exit. Also
        where a rank's training failed under a stop (its collective broke): `save` saves the last whole state, which
        is still whole, so a chief whose peers left first keeps its checkpoint."""
        if self.requested_at is None or self._leaving:
            return
        self._leaving = True
        self.checkpoint = saved if saved is not None else self._save()
        if self.save is not None or saved is not None:
            self._report()  # the process that saves is the one that reports (the chief)
        self.leave()

    def leave(self) -> None:
        """Exit now with `exit_code`: SystemExit (finally blocks and atexit run), and should they hang (a
        collective's shutdown waiting for peers that are gone), the process ends UNWIND_SECONDS later anyway."""
        global _leaving_with
        self._leaving = True
        if threading.current_thread() is not threading.main_thread():
            _exit_now(self.exit_code)  # SystemExit would end only this thread
        _leaving_with = self.exit_code
        _exit_no_later_than(UNWIND_SECONDS, self.exit_code)
        raise SystemExit(self.exit_code)

    def _save(self) -> Path | str | None:
        if self.save is None:
            return None
        try:
            result = self.save()
        except Exception:
            log.exception("saving a checkpoint on stop failed; stopping without one")
            return None
        if isinstance(result, str) and _s3.is_s3(result):
            return result  # a save function that uploads by itself and returns the URI (Path would mangle it)
        return Path(result) if isinstance(result, str | os.PathLike) else None

    def _report(self) -> None:
        info = parse_checkpoint(self.checkpoint) if self.checkpoint is not None else None
        epoch, step = (info.epoch, info.step) if info is not None else (None, None)
        where = _s3.location(self.checkpoint) if self.checkpoint is not None else None  # S3: the URI
        get_reporter().report_stop(where, epoch=epoch, step=step)
        left = self.grace_seconds - (self._clock() - (self.requested_at or 0.0)) - MARGIN_SECONDS
        flush(timeout=max(0.0, min(REPORT_SECONDS, left)))
        if self.checkpoint is not None:
            log.warning("stopped with checkpoint %s", self.checkpoint)
        else:
            log.warning("stopped without a checkpoint")


_current: GracefulStop | None = None
_leaving_with: int | None = None  # the exit code of a stop on its way out (leave), for _skip_teardown


def _skip_teardown() -> None:
    """Registered when the SDK is imported, so it runs after the atexit handlers registered later (the progress
    sender's flush, the training's own): a stop ends the process here, without the interpreter's teardown (see the
    module's docstring). A process that ends otherwise is not touched."""
    if _leaving_with is None:
        return
    mpi = _mpi_abort.live_mpi()
    if mpi is not None:
        mpi.Finalize()  # should it hang (a rank that is gone), the unwind timer still ends the process
    logging.shutdown()
    _exit_now(_leaving_with)


atexit.register(_skip_teardown)


def on_stop(
    save: SaveFunction | None = None,
    *,
    exit_code: int = EXIT_CODE,
    follow_seconds: float = FOLLOW_SECONDS,
    at_safe_points: bool = True,
) -> GracefulStop:
    """Make SIGTERM a graceful stop: at the next safe point call `save()` (it saves a checkpoint, e.g. with
    save_checkpoint, and returns its path), report the stop to the operator and exit with `exit_code`.

    Call it once, from the main thread, before the training loop; again to replace `save`. Give `save` to the
    process that saves checkpoints (the chief) and None to the others (see the module's docstring): those leave
    when their collective breaks, and at the latest `follow_seconds` after SIGTERM. Every process leaves one second
    before the grace period ends, safe point or not. The grace period is TRAININGJOB_GRACE_PERIOD_SECONDS (the
    job's spec.terminationGracePeriodSeconds), else 30 s. With `at_safe_points=False` report_progress and
    save_checkpoint are no safe points: the loop calls `check()` where it decides, e.g. where all ranks agreed to
    stop together because saving needs them all (the TensorFlow example).
    """
    global _current
    stop = GracefulStop(save, exit_code=exit_code, follow_seconds=follow_seconds)
    previous = _current
    if previous is not None and previous.requested_at is not None:
        stop.requested_at = previous.requested_at
    signal.signal(signal.SIGTERM, stop.request)
    _signalwatch.watch(signal.SIGTERM, _request_current)  # seen even while the main thread is in native code
    _current = stop
    _safepoint.hook = stop.check if at_safe_points else None
    return stop


def _request_current(signum: int) -> None:
    if _current is not None:
        _current.request(signum)


def stop_requested() -> bool:
    """Whether SIGTERM asked this process to stop (only known once on_stop was called)."""
    return _current is not None and _current.requested


def _grace_from_env() -> float:
    value = _env.env_int(_env.GRACE_PERIOD_SECONDS, None)
    return float(value) if value is not None and value >= 0 else DEFAULT_GRACE_SECONDS


def _exit_no_later_than(seconds: float, exit_code: int, why: str = "") -> None:
    """End the process after `seconds` if it is still there: a daemon timer exits with `exit_code` (saying `why`);
    should the interpreter be stuck in a call that holds the GIL (a collective's shutdown), faulthandler's own
    thread, which needs no GIL, prints where it hangs and exits with 1 a second later. (A signal could not do it:
    the container's PID 1 ignores every signal it has no handler for, even SIGKILL from inside its namespace.)
    faulthandler keeps one such deadline per process: the latest call's."""
    timer = threading.Timer(seconds, _exit_now, args=(exit_code, why))
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(seconds + 1.0, exit=True)


def _exit_now(exit_code: int, why: str = "") -> None:
    if why:
        with contextlib.suppress(Exception):
            log.warning("leaving now: %s", why)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(exit_code)
