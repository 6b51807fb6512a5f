"""MLflow experiment tracking from inside a TrainingJob, over MLflow's REST API (no mlflow package in the image).

The operator gives tracked jobs MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME and MLFLOW_RUN_NAME (docs/serving.md).
``start_run(params)`` on the chief finds or creates the experiment and the run (a restarted attempt continues the
run of the same name instead of starting another), logs the hyperparameters once, and returns a ``Run`` that logs
metrics per epoch and uploads checkpoints as artifacts (through the server's artifact proxy, ``mlflow server`` with
``--serve-artifacts``, its default). Every other worker, and any job without a tracking server, gets None.

Tracking must never break training: an unreachable or failing server is logged once as a warning and the Run
turns into a no-op.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from . import _env

log = logging.getLogger("trainingjob.sdk")
TIMEOUT = 10.0
ENV_URI, ENV_EXPERIMENT, ENV_RUN_NAME = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_NAME"


class TrackingError(Exception):
    pass


class MlflowClient:
    """The few REST calls the SDK needs, standard library only."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, query: dict[str, str] | None = None):
        url = f"{self.uri}/api/2.0/mlflow/{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data, {"Content-Type": "application/json"}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise TrackingError(f"{method} {path}: HTTP {error.code}: {detail}") from None
        except (OSError, ValueError) as error:
            raise TrackingError(f"{method} {path}: {error}") from None

    def experiment_id(self, name: str) -> str:
        try:
            found = self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
            return str(found["experiment"]["experiment_id"])
        except TrackingError as error:
            if "RESOURCE_DOES_NOT_EXIST" not in str(error):
                raise
        try:
            return str(self.call("POST", "experiments/create", {"name": name})["experiment_id"])
        except TrackingError as error:  # another worker or attempt created it meanwhile
            if "RESOURCE_ALREADY_EXISTS" not in str(error):
                raise
            found = self.call("GET", "experiments/get-by-name", query={"experiment_name": name})
            return str(found["experiment"]["experiment_id"])

    def find_run(self, experiment_id: str, run_name: str) -> dict[str, Any] | None:
        query = {
            "experiment_ids": [experiment_id],
            "filter": f"attributes.run_name = {json.dumps(run_name)}",
            "max_results": 1,
        }
        runs = self.call("POST", "runs/search", query).get("runs") or []
        return runs[0]["info"] if runs else None

    def upload(self, artifact_uri: str, relative: str, path: Path) -> None:
        """PUT one file through the artifact proxy: mlflow-artifacts:/<exp>/<run>/artifacts + relative path."""
        parsed = urllib.parse.urlparse(artifact_uri)
        if parsed.scheme != "mlflow-artifacts":
            raise TrackingError(f"artifact store {artifact_uri} is not served by the tracking server")
        target = f"{parsed.path.strip('/')}/{relative}"
        url = f"{self.uri}/api/2.0/mlflow-artifacts/artifacts/{urllib.parse.quote(target)}"
        request = urllib.request.Request(
            url, path.read_bytes(), {"Content-Type": "application/octet-stream"}, method="PUT"
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT * 6):
                pass
        except (OSError, ValueError) as error:
            raise TrackingError(f"upload {relative}: {error}") from None


class Run:
    """One MLflow run of the job; every method is a no-op after the first failure."""

    def __init__(self, client: MlflowClient, info: dict[str, Any]) -> None:
        self.client = client
        self.run_id = str(info["run_id"])
        self.experiment_id = str(info["experiment_id"])
        self.artifact_uri = str(info.get("artifact_uri") or "")
        self.broken = False

    def _guard(self, what: str, action: Any) -> bool:
        if self.broken:
            return False
        try:
            action()
            return True
        except TrackingError as error:
            self.broken = True
            log.warning("trainingjob.sdk: MLflow %s failed, tracking stops for this run: %s", what, error)
            return False

    def log_params(self, params: dict[str, Any]) -> bool:
        body = {"run_id": self.run_id, "params": [{"key": str(k), "value": str(v)[:6000]} for k, v in params.items()]}
        return self._guard("log params", lambda: self.client.call("POST", "runs/log-batch", body))

    def log_metrics(self, metrics: dict[str, float], step: int) -> bool:
        now = int(time.time() * 1000)
        entries = [{"key": k, "value": float(v), "timestamp": now, "step": int(step)} for k, v in metrics.items()]
        body = {"run_id": self.run_id, "metrics": entries}
        return self._guard("log metrics", lambda: self.client.call("POST", "runs/log-batch", body))

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str = "checkpoints") -> bool:
        """Upload a checkpoint (a file, or every file of a directory) under `artifact_path`/<its name>."""
        source = Path(path)
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())

        def upload() -> None:
            for file in files:
                inner = source.name if file == source else f"{source.name}/{file.relative_to(source)}"
                self.client.upload(self.artifact_uri, f"{artifact_path}/{inner}", file)

        return self._guard("artifact upload", upload)

    def finish(self, status: str = "FINISHED") -> bool:
        body = {"run_id": self.run_id, "status": status, "end_time": int(time.time() * 1000)}
        return self._guard("run update", lambda: self.client.call("POST", "runs/update", body))


def job_hyperparameters() -> dict[str, Any]:
    """spec.hyperparameters as the operator mounts them (TRAININGJOB_HYPERPARAMETERS_FILE); {} outside a job."""
    path = os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE", "").strip()
    try:
        loaded = json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def start_run(params: dict[str, Any] | None = None) -> Run | None:
    """The job's run on the chief (found or created), None elsewhere or untracked. A new run logs `params`, by
    default the job's hyperparameters (spec.hyperparameters)."""
    uri = os.environ.get(ENV_URI, "").strip()
    if not uri or not _env.is_chief():
        return None
    experiment = os.environ.get(ENV_EXPERIMENT, "").strip() or "Default"
    name = os.environ.get(ENV_RUN_NAME, "").strip() or f"run-{int(time.time())}"
    client = MlflowClient(uri)
    try:
        experiment_id = client.experiment_id(experiment)
        info = client.find_run(experiment_id, name)
        created = info is None
        if created:
            tags = [{"key": "mlflow.runName", "value": name}]
            for key, variable in (("trainingjob.name", _env.JOB_NAME), ("trainingjob.namespace", _env.JOB_NAMESPACE)):
                if os.environ.get(variable):
                    tags.append({"key": key, "value": os.environ[variable]})
            body = {
                "experiment_id": experiment_id,
                "run_name": name,
                "start_time": int(time.time() * 1000),
                "tags": tags,
            }
            info = client.call("POST", "runs/create", body)["run"]["info"]
    except (TrackingError, KeyError) as error:
        log.warning("trainingjob.sdk: MLflow at %s unusable, not tracking: %s", uri, error)
        return None
    run = Run(client, info)
    params = job_hyperparameters() if params is None else params
    if created and params:
        run.log_params(params)
    return run
