"""An accepted progress report folded into a TrainingJob's status: status.progress and status.lastCheckpoint.

The planner calls this for the report the operator holds for a job (operator/pending_progress.py), so the report's
parsing, its limits and what it makes of the status stay in this package.
"""

from __future__ import annotations

from typing import Any

from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.progress.history import history_names
from trainingjob.progress.report import Report, checkpoint_status, progress_status


def progress_fields(job: TrainingJob, report: Report | None) -> dict[str, Any]:
    """The JobStatus fields `report` sets over the job's status (none without a report): the progress with its ETA
    from the current attempt's pace and the per-epoch history of the metrics the job names, and the checkpoint it
    reports."""
    if report is None:
        return {}
    status = job.status
    since = status.attempt_start_time or status.start_time
    since_text = since and format_time(since)
    history = history_names(job.annotations)
    fields: dict[str, Any] = {"progress": progress_status(report, status.progress or {}, since_text, history)}
    checkpoint = checkpoint_status(report)
    if checkpoint is not None:
        fields["last_checkpoint"] = checkpoint
    return fields
