"""Optuna, if installed: the sweep planner's engine (sweeps/study.py), or None without the `[sweeps]` extra.

Loaded on the first TrainingSweep the controller plans, not when the operator starts: Optuna (with numpy, its
OpenBLAS thread and SQLAlchemy) costs about a second and ~16 MiB of resident memory, which an operator without
sweeps should not pay, and an operator without the extra must still run every other controller and tell each
TrainingSweep why nothing happens (sweeps/planner.py, SweepControllerUnavailable).
"""

from __future__ import annotations

import functools
import logging
from types import ModuleType

logger = logging.getLogger(__name__)


@functools.cache
def load_engine() -> ModuleType | None:
    """The engine, imported once (later calls return the same module, or None without logging again)."""
    try:
        from trainingjob.sweeps import study
    except ImportError as error:
        logger.warning("sweeps are not available (%s): install the `sweeps` extra to run TrainingSweeps", error)
        return None
    return study
