"""Everything the TrainingJob controller keeps about one job between its reconciles, in one place.

A JobMemory lives while its job is in the cache: forgetting a job is dropping its JobMemory (and its queue entry),
nothing else, so memory does not grow with jobs ever seen. Empty, one costs a few hundred bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainingjob.operator.runtime.expectations import Expectations
from trainingjob.operator.trainingjob.mlflow import RunLookup
from trainingjob.operator.trainingjob.namesakes import TakenNames
from trainingjob.operator.trainingjob.progress import PendingProgress
from trainingjob.reconcile.surroundings import AdmissionDenial


@dataclass(slots=True)
class JobMemory:
    # Writes the caches do not show yet: pods created, pods and gang objects deleted, EndpointSlices written.
    expectations: Expectations = field(default_factory=Expectations)
    # resourceVersion of a job body we wrote over: until the cache shows our write, planning from it is moot.
    superseded: str | None = None
    # Creates the API server refused as invalid (the user's spec), for the planner to report.
    rejections: list[str] = field(default_factory=list)
    # Creates admission refused in the latest applies, until a create succeeds (see AdmissionDenial).
    denial: AdmissionDenial | None = None
    # Since when (monotonic) a status change of worker details alone has been held back (reconcile/status.py).
    details_since: float | None = None
    # The newest progress report not yet in status, and when progress was last written.
    progress: PendingProgress = field(default_factory=PendingProgress)
    # The job's MLflow run, once found.
    tracking: RunLookup = field(default_factory=RunLookup)
    # Worker names held by pods that are not the job's workers.
    names: TakenNames = field(default_factory=TakenNames)
