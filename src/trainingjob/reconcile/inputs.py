"""What a plan depends on besides the job, its children and the clock: what the operator remembers about the job.

The reconciler used to edit a plan after making it (holding back a status change of worker details alone, linking
the MLflow run, planning again with the last progress report when the job finished); each of those is now an input
here and a decision of the planner, so the plan the reconciler gets is the one it writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlanInputs:
    # The newest progress report the operator holds for the job, written or not (ObservedChildren.progress is the
    # one due now): a job that finishes carries it into its last status (operator/pending_progress.py).
    latest_progress: Any = None
    # For how long a status change of worker details alone has been held back (0: none is yet; None: write such a
    # change at once, as a plan made outside the operator does; reconcile/status.py: hold_details).
    details_held_for: float | None = None
    # The job's MLflow run as far as the operator found it ({"experimentId", "runId"}; operator/mlflow.py).
    mlflow_run: Mapping[str, str] | None = None
