"""How late the operator's event loop runs what is ready: the one number that tells a busy or starved process apart
from a slow API server.

Everything the operator does shares one asyncio loop: watch events, reconciles, webhook answers and the leader
Lease's renewal. When the process gets too little CPU (a CPU limit, a loaded node) or one step holds the loop, a
renewal's answer waits behind everything queued before it, and a leader can lose its Lease although the API server
answered in time (seen at 1000 x 8 on a 2-core machine at load 18: "no answer within 3.9s", the operator exited).
A sleeper that measures how much later than asked it wakes up observes exactly that wait, as a histogram, and the
log says when it passes a second, at most once a minute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 0.5  # the probe's own cost: two wake-ups a second
WARN_SECONDS = 1.0  # a second late: a Lease renewal (10 s deadline, 2 s period) starts to be at risk
WARN_EVERY_SECONDS = 60.0


async def watch_loop_lag(
    observe: Callable[[float], None],
    interval: float = INTERVAL_SECONDS,
    warn_after: float = WARN_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Until cancelled: sleep `interval`, observe how much later than that the loop woke this task up."""
    warned_at = -WARN_EVERY_SECONDS
    while True:
        asked = clock()
        await asyncio.sleep(interval)
        lag = max(0.0, clock() - asked - interval)
        observe(lag)
        if lag >= warn_after and clock() - warned_at >= WARN_EVERY_SECONDS:
            warned_at = clock()
            logger.warning(
                "the event loop ran %.1fs late: the process is short of CPU or a step held the loop; Lease renewals, "
                "webhook answers and reconciles all wait as long (metric trainingjob_event_loop_lag_seconds)",
                lag,
            )
