"""Metrics follow a job's life, probes answer, and JSON logs parse line by line with the job on each record."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.jobs import SIM, create_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.metrics import scrape, value
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k

pytestmark = pytest.mark.integration


def test_probes_answer_on_the_leader(operator: RunningOperator) -> None:
    for path, expected in (("/healthz", "ok"), ("/readyz", "ok: leader")):
        with urllib.request.urlopen(f"{operator.metrics_url}{path}", timeout=10) as response:
            assert response.status == 200 and response.read().decode().strip() == expected


def test_metrics_follow_a_job_from_creation_to_success(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    before = scrape(operator)
    create_job(kube, namespace, job_manifest("counted", workers=2, gpuPerWorker=1, complete_after="4s"))
    wait_phase(kube, namespace, "counted", "Running")
    running = scrape(operator)
    assert value(running, "trainingjob_gpus_requested", namespace=namespace) == 2
    assert value(running, "trainingjob_workers", phase="Running") >= 2
    assert (
        value(running, "trainingjob_time_to_running_seconds_count")
        == value(before, "trainingjob_time_to_running_seconds_count") + 1
    )
    wait_phase(kube, namespace, "counted", "Succeeded")
    after = wait_until(lambda: _succeeded_counted(operator, namespace), 30, "the success to be counted")
    assert value(after, "trainingjob_jobs_created_total", namespace=namespace, framework="pytorch") == 1
    assert (
        value(after, "trainingjob_job_duration_seconds_count")
        == value(before, "trainingjob_job_duration_seconds_count") + 1
    )
    assert value(after, "trainingjob_jobs", phase="Succeeded") >= 1
    assert (
        value(after, "trainingjob_api_requests_total", verb="create", resource="pods", code="201")
        >= value(before, "trainingjob_api_requests_total", verb="create", resource="pods", code="201") + 2
    )
    assert value(after, "trainingjob_reconcile_duration_seconds_count") > value(
        before, "trainingjob_reconcile_duration_seconds_count"
    )
    assert value(after, "trainingjob_operator_leader") == 1


def _succeeded_counted(operator: RunningOperator, namespace: str) -> dict | None:
    samples = scrape(operator)
    return samples if value(samples, "trainingjob_jobs_succeeded_total", namespace=namespace) == 1 else None


def test_failures_and_restarts_are_counted_by_reason(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    create_job(
        kube,
        namespace,
        job_manifest(
            "flaky",
            workers=2,
            complete_after=None,
            backoffLimit=0,
            failurePolicy={"backoff": {"baseSeconds": 1, "maxSeconds": 1}},
        ),
    )
    wait_phase(kube, namespace, "flaky", "Running")
    kube.core.patch_namespaced_pod("flaky-worker-0", namespace, {"metadata": {"annotations": {f"{SIM}/evict": "true"}}})
    wait_until(
        lambda: (
            value(scrape(operator), "trainingjob_jobs_restarted_total", namespace=namespace, reason="WorkerDisrupted")
            == 1
        ),
        60,
        "the disruption restart to be counted",
    )
    wait_phase(kube, namespace, "flaky", "Running")
    kube.core.patch_namespaced_pod("flaky-worker-1", namespace, {"metadata": {"annotations": {f"{SIM}/fail": "true"}}})
    wait_phase(kube, namespace, "flaky", "Failed")
    wait_until(
        lambda: (
            value(scrape(operator), "trainingjob_jobs_failed_total", namespace=namespace, reason="BackoffLimitExceeded")
            == 1
        ),
        30,
        "the failure to be counted",
    )


def test_json_logs_parse_line_by_line_and_name_the_job(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    create_job(kube, namespace, job_manifest("logged", complete_after="1s"))
    wait_phase(kube, namespace, "logged", "Succeeded")
    records = [json.loads(line) for line in operator.log_path.read_text().splitlines() if line.strip()]
    assert all({"message", "timestamp", "level", "severity"} <= set(r) for r in records)
    assert {r["level"] for r in records} <= {"debug", "info", "warning", "error", "critical"}
    ours = [r for r in records if r.get("job") == "logged" and r.get("namespace") == namespace]
    assert ours and all(r["reconcile"].startswith("r") for r in ours)
    assert not any("token" in r["message"].lower() and "eyJ" in r["message"] for r in records)


def test_the_api_server_names_the_operator_as_what_wrote_each_child(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """Field managers come from the User-Agent: `kubectl get --show-managed-fields` shows who set what."""
    create_job(kube, namespace, job_manifest("owned", workers=2, complete_after=None))
    wait_phase(kube, namespace, "owned", "Running")
    pod = kube.core.read_namespaced_pod("owned-worker-0", namespace)
    service = kube.core.read_namespaced_service("owned-workers", namespace)
    config_map = kube.core.read_namespaced_config_map("owned-config", namespace)
    for child in (pod, service, config_map):
        spec_managers = {entry.manager for entry in child.metadata.managed_fields if not entry.subresource}
        assert spec_managers == {"trainingjob-operator"}, child.metadata.name
    job = kube.custom.get_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, "owned")
    status_managers = {e["manager"] for e in job["metadata"]["managedFields"] if e.get("subresource") == "status"}
    assert status_managers == {"trainingjob-operator"}
