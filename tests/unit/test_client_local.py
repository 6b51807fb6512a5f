"""The local backend (client/local.py): a job's workers as real local processes with a pod's environment contract,
progress through the operator's protocol into status.progress, logs followed as they come, and the lifecycle
(failure, suspend and resume, scale, delete). Functions here use the standard library and the SDK only."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from trainingjob.client import JobFailed, LocalBackend, NotFound, TrainingClient, TrainingClientError

TIMEOUT = 120


def report_env(epochs: int) -> None:
    """Prints the contract it sees and reports each epoch from rank 0."""
    import json
    import os
    import pathlib

    from trainingjob import sdk

    names = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "CHECKPOINT_DIR")
    seen = {name: os.environ.get(name) for name in names}
    seen["HYPERPARAM_LR"] = os.environ.get("HYPERPARAM_LR")
    seen["GREETING"] = os.environ.get("GREETING")
    seen["hyperparameters"] = json.loads(pathlib.Path(os.environ["TRAININGJOB_HYPERPARAMETERS_FILE"]).read_text())
    print("env " + json.dumps(seen), flush=True)
    for epoch in range(1, epochs + 1):
        if sdk.is_chief():
            sdk.report_progress(epoch=epoch, total_epochs=epochs, metrics={"loss": 1.0 / epoch})
    sdk.flush()


def fail_on_rank_one() -> None:
    import os
    import sys
    import threading

    if os.environ["RANK"] == "1":
        print("rank 1 gives up", flush=True)
        sys.exit(3)
    threading.Event().wait()  # rank 0 would run forever: the backend must stop it


def wait_for_release(marker: str) -> None:
    """Prints, then runs until the file `marker` exists."""
    import os
    import threading

    print(f"started attempt {os.environ['TRAININGJOB_RESTART_COUNT']} of {os.environ['WORLD_SIZE']}", flush=True)
    while not os.path.exists(marker):
        threading.Event().wait(0.05)
    print("released", flush=True)


@pytest.fixture
def client(tmp_path: Path):
    with TrainingClient(backend=LocalBackend(tmp_path / "runs", python=sys.executable)) as local:
        yield local


def env_lines(client: TrainingClient, name: str, worker: int) -> dict:
    line = next(line for line in client.logs(name, worker) if line.startswith("env "))
    return json.loads(line.removeprefix("env "))


def test_workers_get_a_pods_contract_on_one_host_and_rank_0_reports_progress(client: TrainingClient) -> None:
    name = client.train(
        report_env, func_args={"epochs": 4}, workers=2, hyperparameters={"lr": 0.5}, env={"GREETING": "hi"}
    )
    job = client.wait(name, timeout=TIMEOUT)
    assert job.phase == "Succeeded"
    assert job.progress is not None and (job.progress.percent, job.progress.epoch) == (100.0, 4)
    assert job.progress.metrics == {"loss": 0.25}
    first, second = env_lines(client, name, 0), env_lines(client, name, 1)
    assert (first["RANK"], second["RANK"], first["WORLD_SIZE"]) == ("0", "1", "2")
    assert first["MASTER_ADDR"] == second["MASTER_ADDR"] == "127.0.0.1"
    assert first["MASTER_PORT"] == second["MASTER_PORT"] and int(first["MASTER_PORT"]) > 0
    assert (first["PET_NNODES"], second["PET_NODE_RANK"]) == ("2", "1")
    assert Path(first["CHECKPOINT_DIR"]).is_dir()
    assert (first["HYPERPARAM_LR"], first["hyperparameters"], first["GREETING"]) == ("0.5", {"lr": 0.5}, "hi")
    assert [entry["exitCode"] for entry in job.body["status"]["workerStatuses"]] == [0, 0]


def test_a_failing_worker_fails_the_job_and_stops_the_others(client: TrainingClient) -> None:
    name = client.train(fail_on_rank_one, workers=2)
    with pytest.raises(JobFailed, match="worker 1 exited with code 3") as failed:
        client.wait(name, timeout=TIMEOUT)
    statuses = {entry["workerId"]: entry for entry in failed.value.job.body["status"]["workerStatuses"]}
    assert statuses[1]["exitCode"] == 3
    job = client.get(name)
    assert job.phase == "Failed"
    assert "rank 1 gives up" in list(client.logs(name, worker=1))
    # rank 0 was stopped, not left running: its reader finished and following its log ends.
    assert list(client.logs(name, worker=0, follow=True)) == []


def test_logs_follow_a_running_worker_until_it_ends(client: TrainingClient, tmp_path: Path) -> None:
    marker = tmp_path / "release"
    name = client.train(wait_for_release, func_args={"marker": str(marker)})
    lines = client.logs(name, follow=True)
    assert next(lines) == "started attempt 0 of 1"
    marker.touch()
    assert list(lines) == ["released"]
    assert client.wait(name, timeout=TIMEOUT).phase == "Succeeded"


def test_suspend_stops_the_workers_and_resume_and_scale_start_new_attempts(
    client: TrainingClient, tmp_path: Path
) -> None:
    marker = tmp_path / "release"
    name = client.train(wait_for_release, func_args={"marker": str(marker)})
    assert next(client.logs(name, follow=True)) == "started attempt 0 of 1"
    assert client.suspend(name).phase == "Suspended"
    assert client.resume(name).phase == "Running"
    assert client.scale(name, 2).workers == 2
    assert next(client.logs(name, worker=1, follow=True)) == "started attempt 2 of 2"
    marker.touch()
    assert client.wait(name, timeout=TIMEOUT).restart_count == 2
    with pytest.raises(TrainingClientError, match="has 2 workers"):
        list(client.logs(name, worker=2))


def test_delete_removes_the_job_and_ends_a_wait(client: TrainingClient, tmp_path: Path) -> None:
    name = client.train(wait_for_release, func_args={"marker": str(tmp_path / "never")})
    assert [job.name for job in client.list()] == [name]
    client.delete(name)
    with pytest.raises(NotFound):
        client.get(name)
    assert client.list() == []


def test_what_only_a_cluster_runs_is_refused(client: TrainingClient) -> None:
    with pytest.raises(TrainingClientError, match="only a cluster can run"):
        client.submit({"apiVersion": "ml.example.com/v1", "kind": "TrainingJob", "metadata": {"name": "x"}})
    with pytest.raises(TrainingClientError, match="tensorflow with 1 worker only"):
        client.train(report_env, framework="tensorflow", workers=2)


def test_the_progress_sink_accepts_only_the_chiefs_token_for_its_own_job(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "runs", python=sys.executable)
    client = TrainingClient(backend=backend)
    marker = tmp_path / "release"
    name = client.train(wait_for_release, func_args={"marker": str(marker)}, workers=2)
    assert next(client.logs(name, follow=True)).startswith("started")
    runs, base = tmp_path / "runs" / name, backend.sink.url

    def post(job: str, token_file: str, body: bytes) -> int:
        token = (runs / "tokens" / token_file).read_text()
        request = urllib.request.Request(
            f"{base}/v1/namespaces/local/trainingjobs/{job}/progress", data=body, method="POST"
        )
        request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    assert post(name, "worker-1", b'{"epoch": 1}') == 403  # only worker 0 reports, as on the cluster
    assert post("other", "worker-0", b'{"epoch": 1}') == 403
    assert post(name, "worker-0", b'{"epoch": 2, "totalEpochs": 1}') == 400
    assert post(name, "worker-0", b'{"epoch": 1, "totalEpochs": 4}') == 202
    progress = client.progress(name)
    assert progress is not None and progress.percent == 25.0
    marker.touch()
    client.wait(name, timeout=TIMEOUT)
    client.close()
