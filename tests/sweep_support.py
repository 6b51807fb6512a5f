"""Sweeps and trials as the API server would hold them, for the planner's unit tests (no server)."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from trainingjob.api import constants as c
from trainingjob.sweeps.trials import TrialView, trial_view
from trainingjob.sweeps.types import TrainingSweep

NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
NOW_TEXT = "2026-11-28T12:00:00Z"
SWEEP_UID = "sweep-uid-1"


def sweep_body(**spec: Any) -> dict[str, Any]:
    """A digits-like sweep: learningRate (log float) and maxDepth (int), accuracy maximised."""
    base: dict[str, Any] = {
        "trialTemplate": {
            "spec": {
                "framework": "xgboost",
                "image": "registry.example/trainingjob-examples/xgboost:0.1",
                "numWorkers": 1,
                "gpusPerWorker": 0,
                "hyperparameters": {"dataset": "digits", "epochs": 6},
            }
        },
        "parameters": [
            {"name": "learningRate", "type": "float", "min": 0.01, "max": 0.5, "log": True},
            {"name": "maxDepth", "type": "int", "min": 1, "max": 6},
        ],
        "objective": {"metric": "accuracy", "direction": "maximize"},
        "algorithm": {"name": "tpe", "seed": 7, "startupTrials": 2},
        "earlyStopping": {"pruner": "median", "startupTrials": 2, "warmupEpochs": 1},
        "maxTrials": 8,
        "parallelism": 2,
        "maxFailedTrials": 2,
    }
    base.update(spec)
    return {
        "apiVersion": c.SWEEP_API_VERSION,
        "kind": c.SWEEP_KIND,
        "metadata": {"name": "digits", "namespace": "ns", "uid": SWEEP_UID, "generation": 1},
        "spec": base,
    }


def sweep(**spec: Any) -> TrainingSweep:
    return TrainingSweep.from_body(sweep_body(**spec))


def with_status(sweep_object: TrainingSweep, status: Mapping[str, Any]) -> TrainingSweep:
    body = sweep_body(**sweep_object.raw_spec)
    body["status"] = dict(status)
    return TrainingSweep.from_body(body)


def finished(
    manifest: Mapping[str, Any],
    values: Sequence[float],
    phase: str = "Succeeded",
    metric: str = "accuracy",
    total: int | None = None,
) -> dict[str, Any]:
    """A trial manifest as its TrainingJob looks after reporting `values` (one per epoch) and reaching `phase`."""
    body = copy.deepcopy(dict(manifest))
    body["metadata"]["uid"] = f"uid-{body['metadata']['name']}"
    body["metadata"]["creationTimestamp"] = NOW_TEXT
    progress: dict[str, Any] = {}
    if values:
        progress = {
            "epoch": len(values),
            "totalEpochs": total or len(values),
            "metrics": {metric: values[-1]},
            "history": {metric: [{"epoch": i + 1, "value": v} for i, v in enumerate(values)]},
        }
    body["apiVersion"] = c.API_VERSION  # the internal shape: status.phase and status.progress as they are here
    body["status"] = {"phase": phase, "progress": progress}
    return body


def views(bodies: Sequence[Mapping[str, Any]]) -> list[TrialView]:
    found = [trial_view(body) for body in bodies]
    assert all(view is not None for view in found)
    return found  # type: ignore[return-value]
