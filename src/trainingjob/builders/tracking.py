"""MLflow settings of a TrainingJob: which server, experiment and run name its workers log to, and the status that
links the run (docs/serving.md, "MLflow"). Pure: the operator looks the run up (operator/trainingjob/mlflow.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api.types import TrainingJob

ENV_URI, ENV_EXPERIMENT, ENV_RUN_NAME = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_NAME"
# Tags the SDK sets on the run, so a run can be traced back to its job.
TAG_JOB, TAG_NAMESPACE, TAG_UID = "trainingjob.name", "trainingjob.namespace", "trainingjob.uid"


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
