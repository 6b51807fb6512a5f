"""A TrainingSweep's status.phase and its trials' states as enums, the values the CRD schema lists
(api/schema_sweep_status.py reads them from here), so the sweep planner, `tj sweep` and the UI compare members,
not strings. `str` enums: what is written to the API is the value itself."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class SweepPhase(StrEnum):
    """status.phase of a TrainingSweep."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        """Succeeded or Failed: no trial is sampled any more."""
        return self in (SweepPhase.SUCCEEDED, SweepPhase.FAILED)


class TrialState(StrEnum):
    """status.trials[].state: one trial as its sweep judges it."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    PRUNED = "Pruned"
    FAILED = "Failed"
    STOPPED = "Stopped"

    @property
    def done(self) -> bool:
        return self is not TrialState.RUNNING


def sweep_phase(status: Mapping[str, Any]) -> SweepPhase | None:
    """The phase a sweep's stored status names; None for none (or a value this operator does not know)."""
    return next((phase for phase in SweepPhase if phase.value == status.get("phase")), None)
