"""Many jobs at once, and an operator killed mid-flight: every job converges, no pod is duplicated or lost."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.jobs import create_job, get_job, job_manifest, job_pods, phase_of
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator, start_operator

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


@pytest.fixture
def three_namespaces(kube: Kube) -> Iterator[list[str]]:
    names = [f"t-multi-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
    for name in names:
        kube.core.create_namespace(
            {"metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
        )
    for name in names:
        wait_until(lambda n=name: kube.has_service_account(n, "default"), 60, "default ServiceAccount")
    yield names
    for name in names:
        kube.core.delete_namespace(name)


def all_in_phase(kube: Kube, jobs: list[tuple[str, str]], phase: str) -> bool:
    return all(phase_of(get_job(kube, ns, name)) == phase for ns, name in jobs)


def test_thirty_jobs_across_three_namespaces_all_succeed(kube: Kube, three_namespaces: list[str]) -> None:
    jobs = [(ns, f"job-{i}") for ns in three_namespaces for i in range(10)]
    for ns, name in jobs:
        create_job(kube, ns, job_manifest(name, workers=2, complete_after="2s"))
    wait_until(lambda: all_in_phase(kube, jobs, "Succeeded"), 240, "all 30 jobs to succeed", interval=1)
    for ns, name in jobs:
        assert len(job_pods(kube, ns, name)) == 2


def test_operator_killed_mid_flight_converges_without_duplicates(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    jobs = [f"chaos-{i}" for i in range(6)]
    for name in jobs:
        create_job(kube, namespace, job_manifest(name, workers=3, complete_after="6s"))
    wait_until(lambda: len(kube.core.list_namespaced_pod(namespace).items) >= 3, 60, "the first pods")
    operator.stop(hard=True)
    uids_before = {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod(namespace).items}
    restarted = start_operator(
        operator.kubeconfig, operator.log_path, progress_port=operator.progress_port, webhook_port=operator.webhook_port
    )
    operator.process = restarted.process
    operator.metrics_port = restarted.metrics_port
    wait_until(
        lambda: all_in_phase(kube, [(namespace, n) for n in jobs], "Succeeded"), 180, "all jobs to finish", interval=1
    )
    pods = kube.core.list_namespaced_pod(namespace).items
    assert sorted(p.metadata.name for p in pods) == sorted(f"{n}-worker-{i}" for n in jobs for i in range(3))
    survivors = {p.metadata.name: p.metadata.uid for p in pods if p.metadata.name in uids_before}
    assert survivors == {name: uids_before[name] for name in survivors}, "a pod that existed was recreated"
