"""MLflow settings of a TrainingJob: which server, experiment and run name its workers log to, and the status that
links the run (docs/serving.md, "MLflow"). Pure: the operator looks the run up (operator/trainingjob/mlflow.py,
network); the planner writes what is known and says when to look again (link_run)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api.status import JobStatus, Phase
from trainingjob.api.types import TrainingJob

ENV_URI, ENV_EXPERIMENT, ENV_RUN_NAME = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_NAME"


@dataclass(frozen=True)
class TrackingSettings:
    uri: str
    experiment: str
    run_name: str


def tracking_settings(job: TrainingJob, default_uri: str | None) -> TrackingSettings | None:
    """spec.tracking over the operator's default server; None when the job is not tracked."""
    spec = job.raw_spec.get("tracking") or {}
    if spec.get("enabled", True) is False:
        return None
    uri = spec.get("mlflowTrackingUri") or default_uri
    if not uri:
        return None
    experiment = spec.get("experimentName") or f"{job.namespace}/{job.name}"
    return TrackingSettings(str(uri).rstrip("/"), str(experiment), f"{job.name}-{job.uid[:8]}")


def tracking_env(settings: TrackingSettings | None) -> dict[str, str]:
    if settings is None:
        return {}
    return {ENV_URI: settings.uri, ENV_EXPERIMENT: settings.experiment, ENV_RUN_NAME: settings.run_name}


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    return f"{uri}/#/experiments/{experiment_id}/runs/{run_id}"


def tracking_status(settings: TrackingSettings, run: Mapping[str, Any] | None) -> dict[str, str]:
    """status.tracking: where the run is logged, and once found its ids and UI link."""
    status = {"trackingUri": settings.uri, "experimentName": settings.experiment, "runName": settings.run_name}
    if run and run.get("runId") and run.get("experimentId"):
        status.update(experimentId=str(run["experimentId"]), runId=str(run["runId"]))
        status["url"] = run_url(settings.uri, status["experimentId"], status["runId"])
    return status


LOOKUP_INTERVAL = 5.0  # seconds between two lookups of the same job's run
TRACKING_GRACE = 300.0  # how long after a job finished its run is still looked for
NO_RUN_YET = (None, Phase.PENDING, Phase.SUSPENDED)  # phases in which no chief has run, so there is no run


def link_run(
    job: TrainingJob, status: JobStatus, run: Mapping[str, str] | None, default_uri: str | None, now: datetime.datetime
) -> tuple[JobStatus, float | None]:
    """`status` with status.tracking of a tracked job, and in how many seconds to look for the run again (None:
    don't). `run` is what the operator found so far; the one status.tracking has already wins."""
    settings = tracking_settings(job, default_uri)
    if settings is None:
        return status, None
    known = job.status.tracking or {}
    found = known if known.get("runId") else None
    again = None
    if found is None and status.phase not in NO_RUN_YET:
        found = run
        if found is None and still_looking(status, now):
            again = LOOKUP_INTERVAL
    tracked = tracking_status(settings, found)
    return (status if status.tracking == tracked else status.replace(tracking=tracked)), again


def still_looking(status: JobStatus, now: datetime.datetime) -> bool:
    """Look for a job's run while it runs and for TRACKING_GRACE seconds after it finished (the chief may create
    it late), then only when something else reconciles the job."""
    if not status.finished:
        return True
    finished = status.completion_time
    return finished is None or (now - finished).total_seconds() < TRACKING_GRACE
