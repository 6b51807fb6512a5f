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
from trainingjob.api.conversion import convert

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
    # The operator counts the transition after its status write returns, so a test watching the API server can
    # see Running a moment before the count moves: wait for it rather than read it once.
    started = value(before, "trainingjob_time_to_running_seconds_count") + 1
    wait_until(
        lambda: _counted(operator, "trainingjob_time_to_running_seconds_count", started), 30, "the start to be counted"
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


def _counted(operator: RunningOperator, name: str, expected: float) -> dict | None:
    """The scrape once `name` reaches `expected`; a count past it (another job counted) fails the wait's caller."""
    samples = scrape(operator)
    observed = value(samples, name)
    assert observed <= expected, f"{name} is {observed}, expected {expected}: another job was counted"
    return samples if observed == expected else None


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


def _converted_to_v1alpha1(operator: RunningOperator) -> float:
    return value(scrape(operator), "trainingjob_converted_objects_total", from_version=k.V1, to_version=k.V1ALPHA1)


def _conversions_per_write(kube: Kube, namespace: str, name: str, operator: RunningOperator, expected: int) -> float:
    """Conversions to v1alpha1 the operator served per label write (in v1, by another manager) to the job, once at
    least `expected` per write came (the watch cache converts each write after it is stored, so some come late)."""
    writes = 20
    before = _converted_to_v1alpha1(operator)
    for i in range(writes):
        patch = {"metadata": {"labels": {"touched": str(i)}}}
        kube.custom.patch_namespaced_custom_object(k.GROUP, k.V1, namespace, k.PLURAL, name, patch)
    target = before + expected * writes
    settled = wait_until(lambda: _at_least(operator, target), 30, f"{expected} conversions per write of {name}")
    return (settled - before) / writes


def _at_least(operator: RunningOperator, count: float) -> float | None:
    converted = _converted_to_v1alpha1(operator)
    return converted if converted >= count else None


def test_each_write_of_a_job_created_in_v1alpha1_costs_conversions_and_the_metrics_count_them(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """docs/trainingjob.md ("What serving two versions costs"): the API server converts every write of a job for
    its v1alpha1 watch cache, and, when a manager of the job wrote it in v1alpha1 (its creator here), converts the
    object before and after each write to v1alpha1 for managedFields as well. The operator's metrics show it."""
    create_job(kube, namespace, job_manifest("alpha", workers=1, complete_after=None))
    v1_manifest = convert(job_manifest("stable", workers=1, complete_after=None), f"{k.GROUP}/{k.V1}")
    kube.custom.create_namespaced_custom_object(k.GROUP, k.V1, namespace, k.PLURAL, v1_manifest)
    for name in ("alpha", "stable"):
        wait_phase(kube, namespace, name, "Running")
    # Created in v1: the watch cache's one (other jobs' writes meanwhile may add a little).
    assert _conversions_per_write(kube, namespace, "stable", operator, expected=1) < 2
    # Created in v1alpha1: three more, in the write itself (the live object, and the object before and after it).
    assert _conversions_per_write(kube, namespace, "alpha", operator, expected=4) < 5
