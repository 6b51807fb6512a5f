"""MLflow tracking settings, pure: spec.tracking in both versions (and through conversion), the operator's default
server, the workers' MLFLOW_* variables and status.tracking's link."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.conversion import convert, status_in
from trainingjob.api.schema import crd_manifest
from trainingjob.api.status import JobStatus, Phase
from trainingjob.api.types import TrainingJob
from trainingjob.builders.env import worker_env
from trainingjob.builders.tracking import (
    LOOKUP_INTERVAL,
    TRACKING_GRACE,
    link_run,
    still_looking,
    tracking_settings,
    tracking_status,
)
from trainingjob.config import OperatorConfig
from trainingjob.operator.trainingjob.mlflow import MlflowRuns, RunLookup

TRACKING = {"enabled": True, "mlflowTrackingUri": "http://mlflow.mlops:5000/", "experimentName": "digits"}


def job(**spec: Any) -> TrainingJob:
    body = {"framework": "pytorch", "image": "train:1", "command": ["python", "train.py"], "workers": 2, **spec}
    return TrainingJob.from_body({"metadata": {"name": "mnist", "namespace": "ml", "uid": "0123456789"}, "spec": body})


def test_both_versions_have_the_field_and_conversion_keeps_it() -> None:
    for version in crd_manifest()["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]["properties"]
        assert set(root["spec"]["properties"]["tracking"]["properties"]) == set(TRACKING), version["name"]
        assert "runId" in root["status"]["properties"]["tracking"]["properties"], version["name"]
    status = {"tracking": {"trackingUri": "http://m", "runId": "r1", "experimentId": "1", "url": "http://m/#/x"}}
    body = {
        "apiVersion": f"{c.GROUP}/{c.V1ALPHA1}",
        "kind": c.KIND,
        "metadata": {"name": "mnist"},
        "spec": {
            "framework": "pytorch",
            "image": "i",
            "command": ["x"],
            "workers": 1,
            "gpuPerWorker": 0,
            "tracking": TRACKING,
        },
        "status": {"phase": "Running", **status},
    }
    as_v1 = convert(body, f"{c.GROUP}/{c.V1}")
    assert as_v1["spec"]["tracking"] == TRACKING and as_v1["status"]["tracking"] == status["tracking"]
    back = convert(as_v1, f"{c.GROUP}/{c.V1ALPHA1}")
    assert back["spec"] == body["spec"] and back["status"] == body["status"]
    assert status_in(body["status"], c.V1)["tracking"] == status["tracking"]


def test_the_spec_wins_over_the_operator_default_and_can_turn_it_off() -> None:
    assert tracking_settings(job(), None) is None
    default = tracking_settings(job(), "http://default:5000")
    assert (default.uri, default.experiment, default.run_name) == ("http://default:5000", "ml/mnist", "mnist-01234567")
    own = tracking_settings(job(tracking=TRACKING), "http://default:5000")
    assert (own.uri, own.experiment) == ("http://mlflow.mlops:5000", "digits")
    assert tracking_settings(job(tracking={"enabled": False}), "http://default:5000") is None


def test_workers_get_the_mlflow_variables_only_when_tracked() -> None:
    config = OperatorConfig(mlflow_tracking_uri="http://default:5000")
    env = {e["name"]: e.get("value") for e in worker_env(job(), 0, 0, config)}
    assert env["MLFLOW_TRACKING_URI"] == "http://default:5000"
    assert env["MLFLOW_EXPERIMENT_NAME"] == "ml/mnist" and env["MLFLOW_RUN_NAME"] == "mnist-01234567"
    untracked = {e["name"] for e in worker_env(job(), 0, 0, OperatorConfig())}
    assert not {n for n in untracked if n.startswith("MLFLOW_")}


def test_the_status_links_the_run_once_found() -> None:
    settings = tracking_settings(job(tracking=TRACKING), None)
    assert tracking_status(settings, None) == {
        "trackingUri": "http://mlflow.mlops:5000",
        "experimentName": "digits",
        "runName": "mnist-01234567",
    }
    linked = tracking_status(settings, {"experimentId": "3", "runId": "abc"})
    assert linked["url"] == "http://mlflow.mlops:5000/#/experiments/3/runs/abc" and linked["runId"] == "abc"


def test_the_operator_looks_for_a_run_while_the_job_runs_and_briefly_after() -> None:
    now = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
    assert still_looking(JobStatus(phase=Phase.RUNNING), now)
    recently = (now - datetime.timedelta(seconds=TRACKING_GRACE - 10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    long_ago = (now - datetime.timedelta(seconds=TRACKING_GRACE + 10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert still_looking(JobStatus.from_dict({"phase": "Succeeded", "completionTime": recently}), now)
    assert not still_looking(JobStatus.from_dict({"phase": "Failed", "completionTime": long_ago}), now)


def test_an_untracked_job_gets_no_tracking_status_and_no_lookup() -> None:
    now = datetime.datetime.now(datetime.UTC)
    running = JobStatus(phase=Phase.RUNNING)
    linked, again = link_run(job(), running, None, None, now)
    assert linked is running and again is None
    linked, again = link_run(job(), JobStatus(phase=Phase.PENDING), None, "http://default:5000", now)
    assert linked.tracking == {
        "trackingUri": "http://default:5000",
        "experimentName": "ml/mnist",
        "runName": "mnist-01234567",
    }
    assert again is None  # nothing runs yet, so no run to look for


def test_a_prefetched_run_is_linked_without_asking_the_server_again(monkeypatch) -> None:
    """The reconciler prefetches before a quota turn: the plan inside the turn links what was found, and MLflow is
    not asked again."""
    lookups: list[str] = []

    async def lookup(session: Any, settings: Any) -> dict[str, str]:
        lookups.append(settings.run_name)
        return {"experimentId": "7", "runId": "abc"}

    monkeypatch.setattr(MlflowRuns, "_lookup", staticmethod(lookup))
    runs, running, found = MlflowRuns("http://default:5000"), job(), RunLookup()
    running = dataclasses.replace(running, status=JobStatus(phase=Phase.RUNNING))
    asyncio.run(runs.prefetch(found, running))
    assert lookups == ["mnist-01234567"]
    now = datetime.datetime.now(datetime.UTC)
    linked, again = link_run(running, running.status, found.found, "http://default:5000", now)
    assert lookups == ["mnist-01234567"], "the plan linked what the prefetch found"
    assert linked.tracking["runId"] == "abc" and again is None
    pending = job()
    asyncio.run(runs.prefetch(RunLookup(), pending))
    assert len(lookups) == 1, "a job that runs nothing yet has no run to look for"


def test_a_running_job_whose_run_is_not_found_yet_is_looked_at_again() -> None:
    now = datetime.datetime.now(datetime.UTC)
    linked, again = link_run(job(), JobStatus(phase=Phase.RUNNING), None, "http://default:5000", now)
    assert again == LOOKUP_INTERVAL and "runId" not in linked.tracking
