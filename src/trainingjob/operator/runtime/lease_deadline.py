"""The leader's renew deadline, kept by a thread of its own so that a busy event loop cannot postpone it.

The elector (leader.py) renews the Lease on the event loop that also runs every reconcile, watch event and webhook
answer, and it notices a missed renew deadline there too: on a loop whose callbacks take seconds to come round (a
process short of CPU, many reconciles queued), it noticed the deadline as late as the loop was, and every reconcile
step queued before it ran meanwhile. Standbys may take over `lease_duration - renew_deadline` (5 s) after the
deadline, so a leader noticing later than that could write beside the new leader. Measured with 100 busy tasks of
50 ms each (a 5 s loop round): the in-loop check came 6.4 s late with 120 task steps run past the deadline; this
thread stops the leader within `INTERVAL` of it (tests/unit/test_lease_deadline.py).

The thread does no I/O: it compares the monotonic clock with the deadline the elector last set, and calls
`on_missed` (the process's exit) when it has passed. The renewals themselves stay on the loop, so a starved loop can
still lose the Lease; that is the safe direction.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

INTERVAL = 0.1  # seconds between checks: how late the deadline may be noticed, given a CPU


class RenewDeadline:
    """Call `on_missed` once, from a daemon thread, if no renewal is recorded within `seconds` of the last one."""

    def __init__(
        self, seconds: float, on_missed: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self._on_missed = on_missed
        self._clock = clock
        self._deadline: float | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def renewed(self, started: float) -> None:
        """A renewal that started at `started` (the elector's clock) succeeded: the deadline moves, the thread runs."""
        with self._lock:
            self._deadline = started + self.seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="lease-renew-deadline", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Leadership ended on purpose (the Lease released): nothing to enforce any more."""
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(INTERVAL):
            with self._lock:
                missed = self._deadline is not None and self._clock() >= self._deadline
            if missed:
                self._on_missed()
                return
