"""A sweep's status from its trials: counts, one entry per trial, the best trial, phase and conditions (pure).

Everything here is derived from the trials' own objects each time, never accumulated, so a status lost or written
by an older operator is put right by the next reconcile; Events are derived by comparing with the status written
before (`trial_events`), so each state change is told once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainingjob.api.sweep_phases import SweepPhase, TrialState
from trainingjob.planning.actions import Event
from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.sweeps.trials import TrialView, trial_state
from trainingjob.sweeps.types import TrainingSweep


@dataclass(frozen=True)
class Outcome:
    """How the sweep stands: phase, and for a finished one its reason and message."""

    phase: SweepPhase
    reason: str = ""
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.phase.finished


@dataclass(frozen=True)
class Scored:
    """A trial with its state for the sweep and its objective value (None: none reported)."""

    trial: TrialView
    state: TrialState
    reason: str
    value: float | None


def scored(sweep: TrainingSweep, trials: Sequence[TrialView]) -> list[Scored]:
    metric = sweep.spec.objective.metric
    result = []
    for trial in sorted(trials, key=lambda t: t.index):
        state, reason = trial_state(trial, metric)
        value = trial.metrics.get(metric)
        result.append(Scored(trial, state, reason, value if value is not None and math.isfinite(value) else None))
    return result


def best(sweep: TrainingSweep, trials: Sequence[Scored]) -> Scored | None:
    """The succeeded trial with the best value (the earliest among equals)."""
    found: Scored | None = None
    for entry in trials:
        if entry.state is not TrialState.SUCCEEDED or entry.value is None:
            continue
        if found is None or sweep.spec.objective.better(entry.value, found.value):  # type: ignore[arg-type]
            found = entry
    return found


def parameters(sweep: TrainingSweep, trial: TrialView) -> dict[str, Any]:
    return {p.name: trial.hyperparameters[p.name] for p in sweep.spec.parameters if p.name in trial.hyperparameters}


def trial_entry(sweep: TrainingSweep, entry: Scored) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": entry.trial.name,
        "index": entry.trial.index,
        "state": entry.state.value,
        "parameters": parameters(sweep, entry.trial),
    }
    if entry.value is not None:
        record["value"] = entry.value
    if entry.trial.epoch is not None:
        record["epochs"] = entry.trial.epoch
    if entry.reason:
        record["reason"] = entry.reason[:256]
    return record


def counts(trials: Sequence[Scored], created: int = 0) -> dict[str, int]:
    """Trials by state. trialsCreated gives the next trial's index (planner.next_index): it counts deleted trials
    too (`created`), and only trials the API server holds (with a uid), not those a plan is about to create: a
    creation refused for now is tried again under the same index, so the count follows one pass later."""
    by_state = {state: sum(1 for t in trials if t.state is state) for state in TrialState}
    return {
        "trialsCreated": max(created, sum(1 for t in trials if t.trial.uid)),
        "trialsRunning": by_state[TrialState.RUNNING],
        "trialsSucceeded": by_state[TrialState.SUCCEEDED],
        "trialsPruned": by_state[TrialState.PRUNED],
        "trialsFailed": by_state[TrialState.FAILED],
        "trialsStopped": by_state[TrialState.STOPPED],
        "trialsDone": len(trials) - by_state[TrialState.RUNNING],
    }


def conditions(sweep: TrainingSweep, outcome: Outcome, running: int, now: str) -> list[dict[str, Any]]:
    desired = [
        DesiredCondition(
            "Running",
            outcome.phase is SweepPhase.RUNNING,
            outcome.reason if outcome.phase is SweepPhase.PENDING else ("TrialsRunning" if running else "Finished"),
            outcome.message if outcome.phase is SweepPhase.PENDING else f"{running} trial(s) running",
        )
    ]
    if outcome.phase is SweepPhase.SUCCEEDED:
        desired.append(DesiredCondition("Complete", True, outcome.reason, outcome.message))
    if outcome.phase is SweepPhase.FAILED:
        desired.append(DesiredCondition("Failed", True, outcome.reason, outcome.message))
    previous = sweep.status.get("conditions") or []
    return merge_conditions(previous, desired, now, sweep.generation)


def sweep_status(
    sweep: TrainingSweep, trials: Sequence[Scored], outcome: Outcome, now: str, created: int = 0
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": outcome.phase.value,
        "observedGeneration": sweep.generation,
        **counts(trials, created),
        "trials": [trial_entry(sweep, entry) for entry in trials],
    }
    running = status["trialsRunning"]
    status["conditions"] = conditions(sweep, outcome, running, now)
    if trials:
        status["startTime"] = sweep.status.get("startTime") or min(
            (t.trial.created for t in trials if t.trial.created), default=now
        )
    if outcome.finished:
        status["completionTime"] = sweep.status.get("completionTime") or now
    top = best(sweep, trials)
    if top is not None:
        status["bestTrial"] = {
            "name": top.trial.name,
            "index": top.trial.index,
            "value": top.value,
            "parameters": parameters(sweep, top.trial),
        }
    return status


def trial_events(previous: Mapping[str, Any], trials: Sequence[Scored]) -> list[Event]:
    """An Event per trial whose state changed since the status written before (a trial new to it counts from
    Running: TrialCreated is told when it is created)."""
    before = {entry.get("name"): entry.get("state") for entry in previous.get("trials") or ()}
    events = []
    for entry in trials:
        old = before.get(entry.trial.name, TrialState.RUNNING.value)
        if entry.state.value == old or entry.state is TrialState.RUNNING:
            continue
        if entry.state is TrialState.SUCCEEDED:
            message = f"trial {entry.trial.name} succeeded: {entry.value}"
            events.append(Event("Normal", "TrialSucceeded", message))
        elif entry.state is TrialState.FAILED:
            events.append(Event("Warning", "TrialFailed", f"trial {entry.trial.name} failed: {entry.reason}"))
    return events


PROGRESS_FIELDS = ("value", "epochs")  # what a running trial's progress report changes in its entry


def progress_only(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """The new status differs from the one written only by running trials' latest value and epochs: no trial
    started, ended or changed state, nothing else moved. Such a write may wait (operator/trainingsweep: one per
    PROGRESS_WRITE_SECONDS), since each trial's own status already holds its live progress."""
    if previous == status:
        return False
    rest = {k: v for k, v in status.items() if k != "trials"}
    if rest != {k: v for k, v in previous.items() if k != "trials"}:
        return False
    before, after = previous.get("trials") or [], status.get("trials") or []
    if len(before) != len(after):
        return False
    for old, new in zip(before, after, strict=True):
        if new.get("state") != TrialState.RUNNING.value or old.get("state") != new.get("state"):
            if old != new:
                return False
            continue
        if {k: v for k, v in old.items() if k not in PROGRESS_FIELDS} != {
            k: v for k, v in new.items() if k not in PROGRESS_FIELDS
        }:
            return False
    return True
