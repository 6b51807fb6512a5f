"""Progress reports on their way into job status: the newest per job, written at most once per interval.

Workers may report every step; a status write for each would be thousands of writes a minute at scale. Reports in
between writes only replace (merge into) the pending one, so the newest always wins and nothing grows per report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from trainingjob.operator.runtime.store import ObjectKey
from trainingjob.progress.report import Report, merge_reports
from trainingjob.reconcile.actions import Event

logger = logging.getLogger(__name__)
MAX_EVENT_MESSAGE = 1024  # the API server's own refusal can be long; an Event message is read in `describe`

# At most one status write for progress per job this often; reports in between only replace the pending one.
PROGRESS_WRITE_INTERVAL = 3.0


class PendingProgress:
    """The newest report per job not yet in status, and when each job's progress was last written (monotonic)."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self.monotonic = monotonic
        self.reports: dict[ObjectKey, Report] = {}
        self.written: dict[ObjectKey, float] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.reports

    def get(self, key: ObjectKey) -> Report | None:
        return self.reports.get(key)

    def add(self, key: ObjectKey, report: Report) -> float:
        """Keep `report` (merged into one still pending); seconds until it may be written (≤ 0: now)."""
        previous = self.reports.get(key)
        self.reports[key] = report if previous is None else merge_reports(previous, report)
        return self.wait(key)

    def wait(self, key: ObjectKey) -> float:
        """Seconds until this job's progress may be written again (≤ 0: now)."""
        return PROGRESS_WRITE_INTERVAL - (self.monotonic() - self.written.get(key, -1e9))

    def written_out(self, key: ObjectKey, report: Report, job_changed: bool) -> None:
        """`report` went into a status write that was not refused as stale: it is pending no more (unless a newer
        one arrived meanwhile), and when the write changed the job, the interval starts again."""
        if self.reports.get(key) is report:
            del self.reports[key]  # in status now (or it was already: an identical report writes nothing)
        if job_changed:
            self.written[key] = self.monotonic()

    def drop(self, key: ObjectKey, refusal: str) -> Event:
        """The API server refused (422) the status this job's pending report made: keep it no longer, so the next
        reconcile writes without it instead of failing on it forever (a worker that finishes would never end the
        job). The Warning Event to record on the job says so."""
        self.reports.pop(key, None)
        message = f"a progress report was dropped: the API server refused the status it made: {refusal}"
        logger.warning("%s/%s: %s", *key, message)
        return Event("Warning", "ProgressReportDropped", message[:MAX_EVENT_MESSAGE])

    def forget(self, key: ObjectKey) -> None:
        self.reports.pop(key, None)
        self.written.pop(key, None)
