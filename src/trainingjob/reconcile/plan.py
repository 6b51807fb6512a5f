"""The TrainingJob planner's answer: the shared Plan (planning/plan.py) with the job's typed status, and what only a
job's reconcile needs besides: the progress report its status now carries and whether a change of worker details
alone is held back (reconcile/status.py: hold_details)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainingjob.api.status import JobStatus
from trainingjob.planning.plan import Plan
from trainingjob.progress.report import Report


@dataclass
class JobPlan(Plan[JobStatus]):
    status: JobStatus = field(default_factory=JobStatus)
    report: Report | None = None
    details_held: bool = False
