"""A trial as the sweep planner sees it: what the TrainingJob's own spec, annotations and status say.

These views are the sweep's whole memory. The parameters are the job's hyperparameters, the outcome its phase and
the controller's stop mark (ml.example.com/trial-stopped), the objective's values its status.progress (the newest
report, and the per-epoch history the trial keeps because the sweep names the objective in its
ml.example.com/metric-history annotation), and the sampler's attributes an annotation written at creation. So a
restarted operator rebuilds the same study from the trials alone: nothing is lost, nothing is sampled twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.conversion import to_internal
from trainingjob.api.status import Phase, job_phase
from trainingjob.api.sweep_phases import TrialState


@dataclass(frozen=True)
class TrialView:
    """What the planner reads of one trial (a TrainingJob labelled with its sweep's name)."""

    name: str
    uid: str
    index: int
    controller_uid: str
    hyperparameters: Mapping[str, Any]
    phase: Phase | None  # None while the operator has written none
    stopped: str  # the stop mark: "" (none), "Pruned" or "Stopped", and what follows it
    epoch: int | None
    total_epochs: int | None
    metrics: Mapping[str, float]
    history: Mapping[str, tuple[tuple[int, float], ...]]
    sampler_state: str
    failure: str = ""
    created: str = ""
    deleting: bool = False

    def series(self, metric: str) -> tuple[tuple[int, float], ...]:
        """(epoch, value) of `metric`, oldest first; the newest report's value added when the history lacks it (a
        trial that reports no epochs still has a last value)."""
        points = self.history.get(metric, ())
        latest = self.metrics.get(metric)
        if latest is not None and self.epoch is not None and (not points or points[-1][0] < self.epoch):
            points = (*points, (self.epoch, latest))
        return points


def trial_view(body: Mapping[str, Any]) -> TrialView | None:
    """The view of a trial body in any served version; None for a TrainingJob that is no trial."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if c.LABEL_SWEEP not in labels:
        return None
    try:
        index = int(labels.get(c.LABEL_TRIAL_INDEX, ""))
    except ValueError:
        return None
    job = to_internal(body)
    status = job.get("status") or {}
    progress = status.get("progress") or {}
    annotations = metadata.get("annotations") or {}
    owner = next((o for o in metadata.get("ownerReferences") or () if o.get("controller")), {})
    return TrialView(
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        index=index,
        controller_uid=owner.get("uid", ""),
        hyperparameters=dict((job.get("spec") or {}).get("hyperparameters") or {}),
        phase=job_phase(job),
        stopped=annotations.get(c.ANNOTATION_TRIAL_STOPPED, ""),
        epoch=progress.get("epoch"),
        total_epochs=progress.get("totalEpochs"),
        metrics=_numbers(progress.get("metrics")),
        history=_history(progress.get("history")),
        sampler_state=annotations.get(c.ANNOTATION_SAMPLER_STATE, ""),
        failure=_failure(status),
        created=metadata.get("creationTimestamp", ""),
        deleting=metadata.get("deletionTimestamp") is not None,
    )


def _numbers(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, Mapping):
        return {}
    return {k: float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _history(history: Any) -> dict[str, tuple[tuple[int, float], ...]]:
    if not isinstance(history, Mapping):
        return {}
    series = {}
    for name, points in history.items():
        if isinstance(points, list):
            series[name] = tuple((int(p["epoch"]), float(p["value"])) for p in points if _point(p))
    return series


def _point(point: Any) -> bool:
    if not isinstance(point, Mapping):
        return False
    return isinstance(point.get("epoch"), int) and isinstance(point.get("value"), int | float)


def _failure(status: Mapping[str, Any]) -> str:
    """The Failed condition's reason and message, when the job failed."""
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}"[:256]
    return ""


def trial_state(trial: TrialView, metric: str) -> tuple[TrialState, str]:
    """The trial's state for the sweep, and why when it is not a success: the stop mark first (a pruned trial is
    Suspended, not failed), then the job's phase. A job that succeeded without reporting the objective failed as a
    trial: it is never counted as a good result."""
    if trial.stopped.startswith(TrialState.PRUNED):
        return TrialState.PRUNED, trial.stopped
    if trial.stopped.startswith(TrialState.STOPPED):
        return TrialState.STOPPED, trial.stopped
    if trial.phase is Phase.FAILED:
        return TrialState.FAILED, trial.failure or "the TrainingJob failed"
    if trial.phase is Phase.SUCCEEDED:
        if metric not in trial.metrics:
            reported = ", ".join(sorted(trial.metrics)) or "none"
            message = f"ObjectiveNotReported: the trial never reported {metric} (it reported: {reported})"
            return TrialState.FAILED, message
        return TrialState.SUCCEEDED, ""
    return TrialState.RUNNING, ""
