"""Checkpoints in S3 (checkpoint.storage type s3) on the local cluster's real S3 server (SeaweedFS, --with-s3).

trainingjob.sdk saves, prunes and loads them there with boto3, as a worker does; and the xgboost example, run as a
job whose storage is an s3:// path and whose credentials come from the Secret it names, checkpoints to S3, is
suspended (the stop's checkpoint is saved to S3, and status.lastStop names its URI) and resumed, SIGKILLed, resumes
in a new attempt from the newest checkpoint in S3 (RESUME_FROM_CHECKPOINT carries its URI) and Succeeds, leaving
only keepLast checkpoints in the bucket.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.jobs import create_job, env_of, get_job, live_pods, patch_job
from tests.kube import Kube
from tests.local_node import kill_worker
from tests.operator_harness import REPO
from tests.real_roles import RUN_TIMEOUT, log_of, wait_status
from tests.s3_support import s3_client
from trainingjob import sdk
from trainingjob.cluster.control_plane import ClusterState
from trainingjob.cluster.s3 import run

pytestmark = pytest.mark.integration


def stored_keys(credentials: dict[str, str], prefix: str) -> list[str]:
    listed = s3_client(credentials).list_objects_v2(Bucket="checkpoints", Prefix=f"{prefix}/")
    return sorted(item["Key"][len(prefix) + 1 :] for item in listed.get("Contents", []))


def test_the_sdk_saves_prunes_and_loads_checkpoints_in_s3(
    s3_credentials: dict[str, str], namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_credentials.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CHECKPOINT_URI", f"s3://checkpoints/{namespace}/sdk")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "first"))
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "2")
    for epoch in (1, 2):
        write = lambda path, e=epoch: path.write_bytes(b"weights %d" % e)  # noqa: E731
        sdk.save_checkpoint(write, epoch, suffix=".bin", report=False)

    def as_directory(path: Path) -> None:
        (path / "optimizer").mkdir(parents=True)
        (path / "model.bin").write_bytes(b"weights 3")
        (path / "optimizer" / "state.json").write_text('{"step": 3}')

    sdk.save_checkpoint(as_directory, 3, report=False)
    assert stored_keys(s3_credentials, f"{namespace}/sdk") == [
        "ckpt-00000002.bin",
        "ckpt-00000003/.complete",
        "ckpt-00000003/model.bin",
        "ckpt-00000003/optimizer/state.json",
    ], "pruned to keepLast: the oldest is gone, the directory is whole with its marker"

    # A new worker on another node: an empty CHECKPOINT_DIR, resuming from what the operator says.
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "second"))
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", f"s3://checkpoints/{namespace}/sdk/ckpt-00000003")
    assert sdk.should_resume()
    latest = sdk.latest_checkpoint()
    assert latest == tmp_path / "second" / "ckpt-00000003"
    assert (latest / "model.bin").read_bytes() == b"weights 3"
    assert json.loads((latest / "optimizer" / "state.json").read_text()) == {"step": 3}
    assert sorted(p.name for p in (tmp_path / "second").iterdir()) == ["ckpt-00000003"], "no marker, no temporary"

    s3_client(s3_credentials).delete_object(Bucket="checkpoints", Key=f"{namespace}/sdk/ckpt-00000003/.complete")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "third"))
    assert sdk.latest_checkpoint() == tmp_path / "third" / "ckpt-00000002.bin", "an incomplete directory is skipped"
    assert (tmp_path / "third" / "ckpt-00000002.bin").read_bytes() == b"weights 2"


def test_a_replaced_attempt_may_not_save_into_the_bucket_the_new_one_resumes_from(
    s3_credentials: dict[str, str], namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fence of sdk/_fence.py in S3: the old gang (its pods forced away, training on behind a partition) saves
    nothing more once the new attempt resumed, though each has its own CHECKPOINT_DIR scratch."""
    for name, value in s3_credentials.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CHECKPOINT_URI", f"s3://checkpoints/{namespace}/fenced")
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "1")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "old"))
    monkeypatch.setenv("TRAININGJOB_RESTART_COUNT", "0")
    sdk.save_checkpoint(lambda path: path.write_bytes(b"epoch 1"), 1, suffix=".bin", report=False)

    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "new"))
    monkeypatch.setenv("TRAININGJOB_RESTART_COUNT", "1")
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", f"s3://checkpoints/{namespace}/fenced/ckpt-00000001.bin")
    assert sdk.resume_point() == (2, tmp_path / "new" / "ckpt-00000001.bin")

    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "old"))
    monkeypatch.setenv("TRAININGJOB_RESTART_COUNT", "0")
    with pytest.raises(sdk.SupersededAttempt, match="superseded by attempt 1"):
        sdk.save_checkpoint(lambda path: path.write_bytes(b"stale"), 2, suffix=".bin", report=False)
    assert stored_keys(s3_credentials, f"{namespace}/fenced") == [".attempt-worker-0", "ckpt-00000001.bin"], (
        "nothing pruned"
    )


def xgboost_on_s3(namespace: str) -> dict[str, Any]:
    body = yaml.safe_load((REPO / "examples" / "xgboost" / "trainingjob-local.yaml").read_text())
    spec = body["spec"]
    spec["workers"] = 2
    spec["hyperparameters"].update(epochs=8, epochSeconds=2)
    storage = {"type": "s3", "path": f"s3://checkpoints/{namespace}/xgb", "secretName": "s3-credentials"}
    spec["checkpoint"] = {"enabled": True, "interval": 1, "keepLast": 2, "storage": storage}
    return body


@pytest.mark.usefixtures("operator")
@pytest.mark.timeout(RUN_TIMEOUT + 120)
def test_an_s3_job_checkpoints_is_killed_resumes_from_s3_and_keeps_only_the_last(
    kube: Kube, namespace: str, s3_server: ClusterState, s3_credentials: dict[str, str]
) -> None:
    run.apply_secret(s3_server, namespace, "s3-credentials")
    body = xgboost_on_s3(namespace)
    job, epochs = body["metadata"]["name"], body["spec"]["hyperparameters"]["epochs"]
    create_job(kube, namespace, body)
    prefix = f"{namespace}/xgb/{get_job(kube, namespace, job)['metadata']['uid']}"  # the run's own prefix
    first = wait_status(kube, namespace, job, lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) >= 2, "2")
    assert first["lastCheckpoint"]["path"].startswith(f"s3://checkpoints/{prefix}/ckpt-"), first
    assert any(key.startswith("ckpt-") for key in stored_keys(s3_credentials, prefix))

    # A graceful stop saves into S3 too, and status says where: the URI a resume reads, not the pod's scratch path.
    patch_job(kube, namespace, job, {"spec": {"suspend": True}})
    stopped = wait_status(kube, namespace, job, lambda s: (s.get("lastStop") or {}).get("checkpointed"), "stop")
    saved = stopped["lastStop"]["checkpoint"]
    assert saved["path"] == f"s3://checkpoints/{prefix}/ckpt-{saved['epoch']:08d}.json", stopped["lastStop"]
    assert stopped["lastCheckpoint"]["path"] == saved["path"]
    assert f"ckpt-{saved['epoch']:08d}.json" in stored_keys(s3_credentials, prefix)
    patch_job(kube, namespace, job, {"spec": {"suspend": False}})
    wait_status(kube, namespace, job, lambda s: (s.get("lastCheckpoint") or {}).get("epoch", 0) > saved["epoch"], "on")
    kill_worker(namespace, job, 1)  # SIGKILL, as the OOM killer would

    status = wait_status(kube, namespace, job, lambda s: s.get("phase") == "Succeeded", "Succeeded", RUN_TIMEOUT)
    assert status["restartCount"] == 1, status
    assert status["lastCheckpoint"]["epoch"] == epochs, status
    assert status["lastCheckpoint"]["path"] == f"s3://checkpoints/{prefix}/ckpt-{epochs:08d}.json"
    logs = log_of(kube, namespace, f"{job}-worker-0")
    resumed = re.findall(r"resuming from \S*/ckpt-(\d{8})\.json at epoch (\d+)", logs)
    assert len(resumed) == 1, logs[-2000:]
    assert int(resumed[0][1]) == int(resumed[0][0]) + 1 >= 3, "resumed after a checkpoint of an earlier attempt"
    pods = live_pods(kube, namespace, job) or []
    for pod in pods:  # the second attempt's pods, if they are kept: RESUME_FROM_CHECKPOINT is an s3:// URI
        assert env_of(pod)["RESUME_FROM_CHECKPOINT"].startswith(f"s3://checkpoints/{prefix}/ckpt-")
    for worker in (0, 1):  # both resumed in the attempt that finished, fencing the older ones out of the bucket
        key = f"{prefix}/.attempt-worker-{worker}"
        fence = s3_client(s3_credentials).get_object(Bucket="checkpoints", Key=key)["Body"].read()
        assert int(fence) == status["attempt"] >= 1, (key, fence)
    assert stored_keys(s3_credentials, prefix) == [
        ".attempt-worker-0",
        ".attempt-worker-1",
        f"ckpt-{epochs - 1:08d}.json",
        f"ckpt-{epochs:08d}.json",
    ], "the bucket pruned to keepLast"
