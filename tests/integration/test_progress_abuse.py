"""Progress reports an attacker (or a careless training script) sends must never freeze a job (issue 41).

Found by trying: two accepted reports with different sets of 32 metric names merged into more than the schema's 32,
and an epoch of 10**30 was accepted; the status write got 422 for good, the pending report was never dropped, and a
worker that completed left its job Running. Now counts past the schema's int64 are refused (400), merged metrics
keep the newest 32 names, and the job ends when its worker does.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.jobs import SIM, create_job, event_reasons, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.progress.report import MAX_METRICS

pytestmark = pytest.mark.integration


def _metrics_of(kube: Kube, namespace: str, name: str) -> dict:
    return (((get_job(kube, namespace, name) or {}).get("status") or {}).get("progress") or {}).get("metrics") or {}


def test_reports_past_the_schema_never_freeze_the_job(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    create_job(kube, namespace, job_manifest("counted", complete_after=None))
    wait_phase(kube, namespace, "counted", "Running")
    context = worker_ca(kube, namespace, "counted")
    token = pod_token(kube, namespace, "counted-worker-0")

    def report(body: dict) -> tuple[int, dict]:
        return post(operator, context, namespace, "counted", token, json.dumps(body).encode())

    first = {f"a{index}": float(index) for index in range(MAX_METRICS)}
    assert report({"epoch": 1, "totalEpochs": 9, "metrics": first})[0] == 202
    wait_until(lambda: _metrics_of(kube, namespace, "counted") == first, 30, "the first 32 metrics in status")
    second = {f"b{index}": float(index) for index in range(MAX_METRICS)}
    assert report({"epoch": 2, "metrics": second})[0] == 202
    status, answer = report({"epoch": 10**30})
    assert status == 400 and "at most" in answer["reason"], answer
    wait_until(lambda: _metrics_of(kube, namespace, "counted") == second, 30, "the newest 32 metrics in status")

    kube.core.patch_namespaced_pod(
        "counted-worker-0", namespace, {"metadata": {"annotations": {f"{SIM}/complete-after": "1s"}}}
    )
    done = wait_phase(kube, namespace, "counted", "Succeeded", timeout=60)
    assert done["status"]["progress"]["epoch"] == 2
    assert "ProgressReportDropped" not in event_reasons(kube, namespace, "counted")


def _status(kube: Kube, namespace: str, name: str) -> dict:
    return (get_job(kube, namespace, name) or {}).get("status") or {}


def test_a_replayed_or_late_report_never_moves_the_status_back(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """A report of worker 0 sent again later, with its own live token (the SDK retrying one the endpoint had
    answered too slowly, or anyone holding the token): an older epoch, step or checkpoint is refused (409) and the
    status keeps the newer one; a duplicate is harmless (nothing counted twice)."""
    create_job(kube, namespace, job_manifest("replayed", workers=1, complete_after=None))
    wait_phase(kube, namespace, "replayed", "Running")
    context, token = worker_ca(kube, namespace, "replayed"), pod_token(kube, namespace, "replayed-worker-0")

    def send(body: dict) -> tuple[int, dict]:
        return post(operator, context, namespace, "replayed", token, json.dumps(body).encode())

    older = {"epoch": 1, "totalEpochs": 10, "step": 100, "checkpoint": {"path": "/ckpt/1", "epoch": 1}}
    newer = {"epoch": 3, "totalEpochs": 10, "step": 300, "checkpoint": {"path": "/ckpt/3", "epoch": 3}}
    assert send(older)[0] == 202 and send(newer)[0] == 202
    wait_until(lambda: _status(kube, namespace, "replayed").get("progress", {}).get("epoch") == 3, 60, "epoch 3")
    status, answer = send(older)  # the replay
    assert status == 409 and "older" in answer["reason"], (status, answer)
    status, answer = send({"epoch": 3, "step": 120})  # the same epoch, an earlier step
    assert status == 409, (status, answer)
    assert send({"checkpoint": {"path": "/ckpt/2", "epoch": 2}})[0] == 409  # a checkpoint older than the last one
    assert send(newer)[0] == 202  # a duplicate: nothing in it is older
    assert send({"epoch": 4, "totalEpochs": 10, "step": 400})[0] == 202
    wait_until(lambda: _status(kube, namespace, "replayed").get("progress", {}).get("epoch") == 4, 60, "epoch 4")
    final = _status(kube, namespace, "replayed")
    assert final["lastCheckpoint"]["path"] == "/ckpt/3", final["lastCheckpoint"]
    assert final["progress"]["step"] == 400, final["progress"]
    percents = [point["percent"] for point in final["progress"].get("recent", [])]
    assert percents == sorted(set(percents)), f"no point counted twice, none going back: {percents}"
