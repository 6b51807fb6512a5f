"""Progress reports on their way into job status: the newest per job, written at most once per interval.

Workers may report every step; a status write for each would be thousands of writes a minute at scale. Reports in
between writes only replace (merge into) the pending one, so the newest always wins and nothing grows per report.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from trainingjob.planning.actions import Event
from trainingjob.progress.report import Report, merge_reports

logger = logging.getLogger(__name__)
MAX_EVENT_MESSAGE = 1024  # the API server's own refusal can be long; an Event message is read in `describe`
# At most one status write for progress per job this often; reports in between only replace the pending one.
PROGRESS_WRITE_INTERVAL = 3.0


@dataclass(slots=True)
class PendingProgress:
    """One job's newest report not yet in status, and when its progress was last written (monotonic seconds)."""

    report: Report | None = None
    written_at: float = -1e9

    def add(self, report: Report, now: float) -> float:
        """Keep `report` (merged into one still pending); seconds until it may be written (≤ 0: now)."""
        self.report = report if self.report is None else merge_reports(self.report, report)
        return self.wait(now)

    def wait(self, now: float) -> float:
        """Seconds until this job's progress may be written again (≤ 0: now)."""
        return PROGRESS_WRITE_INTERVAL - (now - self.written_at)

    def written_out(self, report: Report, job_changed: bool, now: float) -> None:
        """`report` went into a status write that was not refused as stale: it is pending no more (unless a newer
        one arrived meanwhile), and when the write changed the job, the interval starts again."""
        if self.report is report:
            self.report = None  # in status now (or it was already: an identical report writes nothing)
        if job_changed:
            self.written_at = now

    def drop(self, refusal: str) -> Event:
        """The API server refused (422) the status this job's pending report made: keep it no longer, so the next
        reconcile writes without it instead of failing on it forever (a worker that finishes would never end the
        job). The Warning Event to record on the job says so."""
        self.report = None
        message = f"a progress report was dropped: the API server refused the status it made: {refusal}"
        logger.warning("%s", message)
        return Event("Warning", "ProgressReportDropped", message[:MAX_EVENT_MESSAGE])
