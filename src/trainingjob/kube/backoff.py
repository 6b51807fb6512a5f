"""The one backoff formula: a delay that doubles per failure in a row up to a cap, jittered where many clients may
fail at once (an API server restart cuts every watch of every program at the same moment)."""

from __future__ import annotations

import random
from collections.abc import Callable

# Watches (operator, node agent, UI): 1 s doubling to 30 s.
WATCH_BACKOFF_BASE = 1.0
WATCH_BACKOFF_MAX = 30.0


def doubling(base: float, cap: float, in_a_row: int) -> float:
    """base, 2 x base, 4 x base, … up to cap, for the 1st, 2nd, 3rd, … occurrence in a row."""
    return min(base * 2 ** max(in_a_row - 1, 0), cap)


def jittered(delay: float, rand: Callable[[], float] = random.random) -> float:
    """`delay` ±20 %: clients cut at once do not come back in lockstep."""
    return delay * (0.8 + 0.4 * rand())


def watch_backoff(failures: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds before a watch that failed `failures` times in a row tries again: 1, 2, 4, … 30, each ±20 %."""
    return jittered(doubling(WATCH_BACKOFF_BASE, WATCH_BACKOFF_MAX, failures), rand)
