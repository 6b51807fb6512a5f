"""Optuna, if installed: the sweep planner's engine (sweeps/study.py), or None without the `[sweeps]` extra.

Imported once, when the operator starts: Optuna (with numpy and SQLAlchemy) costs about a second and some 60 MiB,
which an operator without sweeps should not pay, and an operator without the extra must still run every other
controller and tell each TrainingSweep why nothing happens (sweeps/planner.py, SweepControllerUnavailable).
"""

from __future__ import annotations

import logging
from types import ModuleType

logger = logging.getLogger(__name__)


def load_engine() -> ModuleType | None:
    try:
        from trainingjob.sweeps import study
    except ImportError as error:
        logger.warning("sweeps are not available (%s): install the `sweeps` extra to run TrainingSweeps", error)
        return None
    return study
