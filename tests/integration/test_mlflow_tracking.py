"""MLflow tracking against a real MLflow server (`mlflow server`, SQLite backend, artifact proxy) that this module
starts on the local nodes' gateway: a TrainingJob with spec.tracking trains the digits example on two local workers;
the chief alone logs hyperparameters, per-epoch metrics and its checkpoints as artifacts, and the job's status links
the run."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER
from trainingjob.cluster.control_plane import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

MLFLOW = Path(os.environ.get("MLFLOW_VENV", Path.home() / ".cache" / "trainingjob" / "mlflow-venv")) / "bin" / "mlflow"


def rest(uri: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{uri}/api/2.0/{path}", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real MLflow tracking server the pods reach at the gateway of the local nodes' network."""
    from tests.conftest import TEST_CLUSTER_NAME

    if not MLFLOW.exists():
        pytest.fail(f"{MLFLOW} is missing: run `make mlflow-server` (make test does)")
    state = ClusterState.load(TEST_CLUSTER_NAME)
    if state is None or state.pod_network is None:
        pytest.skip("the local nodes run without their own network (not root, or not a local cluster)")
    host = state.pod_network.gateway
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    directory = tmp_path_factory.mktemp("mlflow")
    command = [
        *(str(MLFLOW), "server", "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}"),
        *("--artifacts-destination", str(directory / "artifacts"), "--host", host, "--port", str(port)),
        *("--workers", "1", "--allowed-hosts", "*"),
    ]
    log = (directory / "server.log").open("wb")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=directory, start_new_session=True)
    uri = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 120
        while not healthy(uri):
            assert server.poll() is None, (directory / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "mlflow server not healthy within 120s"
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(server.pid, 15)  # its own session: the CLI and the uvicorn worker it started
        server.wait(timeout=30)
        log.close()


def tracked_job(name: str, uri: str, experiment: str) -> dict[str, Any]:
    return job_manifest(
        name,
        workers=2,
        complete_after=None,
        image="registry.example/trainingjob-examples/serving:0.1",
        command=["python3", "/app/train_digits.py"],
        hyperparameters={"epochs": "3", "learning_rate": "0.4"},
        checkpoint={"enabled": True, "storage": {"type": "pvc", "size": "100Mi", "accessModes": ["ReadWriteOnce"]}},
        tracking={"mlflowTrackingUri": uri, "experimentName": experiment},
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        scheduling={"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
    )


def test_the_chief_logs_params_metrics_and_checkpoints_and_the_status_links_the_run(
    kube: Kube, namespace: str, mlflow_uri: str
) -> None:
    experiment = f"{namespace}/digits"
    job = create_job(kube, namespace, tracked_job("digits", mlflow_uri, experiment))
    pod = wait_until(lambda: kube.pod_or_none(namespace, "digits-worker-1"), 60, "worker 1")
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    run_name = f"digits-{job['metadata']['uid'][:8]}"
    assert (env["MLFLOW_TRACKING_URI"], env["MLFLOW_EXPERIMENT_NAME"]) == (mlflow_uri, experiment)
    assert env["MLFLOW_RUN_NAME"] == run_name
    wait_phase(kube, namespace, "digits", "Succeeded", timeout=300)

    def linked() -> dict[str, Any] | None:
        tracking = ((get_job(kube, namespace, "digits") or {}).get("status") or {}).get("tracking") or {}
        return tracking if tracking.get("runId") else None

    tracking = wait_until(linked, 60, "status.tracking to link the run")
    found = rest(mlflow_uri, f"mlflow/experiments/get-by-name?experiment_name={urllib.parse.quote(experiment)}")
    experiment_id = found["experiment"]["experiment_id"]
    runs = rest(mlflow_uri, "mlflow/runs/search", {"experiment_ids": [experiment_id]})["runs"]
    assert len(runs) == 1  # the chief's alone: worker 1 trained too, but tracks nothing
    (run,) = runs
    assert tracking == {
        "trackingUri": mlflow_uri,
        "experimentName": experiment,
        "runName": run_name,
        "experimentId": experiment_id,
        "runId": run["info"]["run_id"],
        "url": f"{mlflow_uri}/#/experiments/{experiment_id}/runs/{run['info']['run_id']}",
    }
    assert run["info"]["run_name"] == run_name and run["info"]["status"] == "FINISHED"
    params = {p["key"]: p["value"] for p in run["data"]["params"]}
    assert params == {"epochs": "3", "learning_rate": "0.4"}
    tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
    assert (tags["trainingjob.name"], tags["trainingjob.namespace"]) == ("digits", namespace)
    query = urllib.parse.urlencode({"run_id": run["info"]["run_id"], "metric_key": "accuracy"})
    history = rest(mlflow_uri, f"mlflow/metrics/get-history?{query}")["metrics"]
    assert sorted(m["step"] for m in history) == [0, 1, 2]  # one value per epoch, from one worker
    assert all(0.8 < m["value"] <= 1.0 for m in history)
    query = urllib.parse.urlencode({"run_id": run["info"]["run_id"], "path": "checkpoints"})
    files = rest(mlflow_uri, f"mlflow/artifacts/list?{query}")["files"]
    assert sorted(f["path"] for f in files) == [f"checkpoints/ckpt-{epoch:08d}.npz" for epoch in range(3)]
    assert all(int(f["file_size"]) > 1000 for f in files)
