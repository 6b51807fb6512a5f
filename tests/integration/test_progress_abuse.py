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
