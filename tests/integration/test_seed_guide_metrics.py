"""Seed 002's per-job training gauges in the operator's /metrics: a job's chief reports its epoch, loss and accuracy
through the real progress endpoint (a pod-bound token, TokenReview), the gauges show them under the guide's names
and labels, and they are gone from /metrics once the job is deleted."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_progress_endpoint import pod_token, post, worker_ca
from tests.jobs import create_job, delete_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.metrics import scrape
from tests.operator_harness import RunningOperator

pytestmark = pytest.mark.integration

GUIDE_GAUGES = ("trainingjob_progress_percent", "trainingjob_current_epoch", "trainingjob_loss", "trainingjob_accuracy")


def job_series(operator: RunningOperator, namespace: str, name: str) -> dict[str, float]:
    """The guide's gauges of one job: {metric name: value}."""
    labels = (("namespace", namespace), ("trainingjob", name))
    return {metric: value for (metric, found), value in scrape(operator).items() if found == labels}


def test_the_guides_gauges_follow_the_reports_and_go_with_the_job(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create_job(kube, namespace, job_manifest("resnet", workers=2, complete_after=None))
    create_job(kube, namespace, job_manifest("silent", complete_after=None))
    wait_phase(kube, namespace, "resnet", "Running")
    report = {"epoch": 9, "totalEpochs": 20, "metrics": {"loss": 0.234, "accuracy": 0.876, "lr": 0.1}}
    token = pod_token(kube, namespace, "resnet-worker-0")
    context = worker_ca(kube, namespace, "resnet")
    assert post(operator, context, namespace, "resnet", token, json.dumps(report).encode())[0] == 202

    expected = {
        "trainingjob_progress_percent": 45.0,
        "trainingjob_current_epoch": 9.0,
        "trainingjob_loss": 0.234,
        "trainingjob_accuracy": 0.876,
    }
    assert wait_until(lambda: job_series(operator, namespace, "resnet") == expected, 60, "the guide's gauges")
    assert (get_job(kube, namespace, "resnet") or {})["status"]["progress"]["metrics"]["lr"] == 0.1
    series = [key for key in scrape(operator) if key[0] in GUIDE_GAUGES and ("namespace", namespace) in key[1]]
    assert len(series) == 4, "one series per gauge for the job that reported; none for the silent one or for lr"

    delete_job(kube, namespace, "resnet")
    wait_until(lambda: get_job(kube, namespace, "resnet") is None, 60, "the job to be deleted")
    assert wait_until(lambda: job_series(operator, namespace, "resnet") == {}, 30, "the gauges to go with the job")
