"""The module-level API: one lazily created ProgressReporter per process behind plain functions.

Why a default instance: training scripts want ``report_progress(epoch=3, loss=0.4)`` without plumbing an object
through their loop, and the throttle and the once-per-kind warnings only work if every call shares one state.
It is created on first use, from the environment as it is then (so launchers may set variables late), and tests or
unusual setups can swap it with ``set_default_reporter``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping

from . import _safepoint
from .reporter import FLUSH_SECONDS, ProgressReporter

log = logging.getLogger("trainingjob.sdk")

_default: ProgressReporter | None = None
_default_lock = threading.Lock()


def get_reporter() -> ProgressReporter:
    """The default reporter, created from the environment on first use (one per process, so one set of warnings)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ProgressReporter()
        return _default


def set_default_reporter(reporter: ProgressReporter | None) -> None:
    """Replace the default reporter (e.g. one with another min_interval); None: create it anew on next use."""
    global _default
    with _default_lock:
        _default = reporter


def report_progress(
    epoch: int | None = None,
    total_epochs: int | None = None,
    step: int | None = None,
    total_steps: int | None = None,
    metrics: Mapping[str, float] | None = None,
    **extra_metrics: float,
) -> bool:
    """Report progress through the default reporter (see ProgressReporter.report_progress). Never raises, except
    that after ``on_stop`` it is a safe point: a stop requested by SIGTERM saves, reports and exits here."""
    try:
        reporter = get_reporter()
    except Exception:  # e.g. a broken environment: still never raise into the training loop
        log.debug("cannot create the progress reporter", exc_info=True)
        return False
    handed = reporter.report_progress(epoch, total_epochs, step, total_steps, metrics, **extra_metrics)
    _safepoint.reached()  # a stop requested by SIGTERM (sdk.on_stop) may end the process here
    return handed


def report_checkpoint(path: str | os.PathLike[str], epoch: int | None = None, step: int | None = None) -> bool:
    """Report a saved checkpoint through the default reporter; never throttled away. Never raises."""
    try:
        reporter = get_reporter()
    except Exception:
        log.debug("cannot create the progress reporter", exc_info=True)
        return False
    return reporter.report_checkpoint(path, epoch, step)


def flush(timeout: float = FLUSH_SECONDS) -> bool:
    """Send what the default reporter held back and wait up to `timeout` s for it (call it when training ends).

    True if everything reported so far reached the endpoint (or reporting is off, outside a job). Never raises.
    """
    try:
        reporter = get_reporter()
    except Exception:
        log.debug("cannot create the progress reporter", exc_info=True)
        return False
    return reporter.flush(timeout)
