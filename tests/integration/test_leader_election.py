"""Two replicas: only the Lease holder reconciles; when it dies the standby takes over, without duplicates.

Pod names are deterministic, so equal names alone cannot show a duplicate or a recreated pod: the test also checks
that every pod the old leader created keeps its UID, and that the standby wrote nothing while it was standing by.
"""

from __future__ import annotations

import time

import pytest

from tests.jobs import create_job, get_job, job_manifest, phase_of
from tests.kube import Kube, wait_until
from tests.metrics import scrape, value
from tests.operator_harness import OPERATOR_NAMESPACE, RunningOperator, healthy, start_operator

pytestmark = [pytest.mark.integration]
LEASE = "trainingjob-operator"
WRITE_VERBS = ("create", "update", "patch", "delete")


def lease_holder(kube: Kube) -> str | None:
    from kubernetes import client

    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE)
    return lease.spec.holder_identity


def pod_uids(kube: Kube, namespace: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in kube.core.list_namespaced_pod(namespace).items}


def writes(operator: RunningOperator) -> float:
    """API writes the replica's reconciler made (its client counts every request, Lease renewals included)."""
    samples = scrape(operator)
    return sum(value(samples, "trainingjob_api_requests_total", verb=verb) for verb in WRITE_VERBS)


def adopt(session_operator: RunningOperator, successor: RunningOperator) -> None:
    """The successor becomes the session's operator for the tests that follow."""
    session_operator.process = successor.process
    session_operator.progress_port = successor.progress_port
    session_operator.metrics_port = successor.metrics_port
    session_operator.webhook_port = successor.webhook_port
    session_operator.log_path = successor.log_path


def test_standby_takes_over_when_the_leader_dies(kube: Kube, namespace: str, operator: RunningOperator) -> None:
    leader = wait_until(lambda: lease_holder(kube), 60, "a lease holder")
    standby = start_operator(operator.kubeconfig, operator.log_path.with_name("standby.log"))
    try:
        time.sleep(3)  # several renew periods: the standby must not have taken the lease
        assert lease_holder(kube) == leader
        jobs = [f"ha-{i}" for i in range(5)]
        for name in jobs:
            create_job(kube, namespace, job_manifest(name, workers=2, complete_after="8s"))
        wait_until(lambda: len(kube.core.list_namespaced_pod(namespace).items) >= 2, 60, "the leader to start work")
        assert writes(standby) == 0 and value(scrape(standby), "trainingjob_operator_leader") == 0
        before_takeover = pod_uids(kube, namespace)
        operator.stop(hard=True)
        killed_at = time.monotonic()
        wait_until(lambda: lease_holder(kube) not in (None, leader), 60, "the standby to take the lease")
        assert time.monotonic() - killed_at < 30  # lease duration 15 s plus renew period
        wait_until(
            lambda: all(phase_of(get_job(kube, namespace, n)) == "Succeeded" for n in jobs),
            120,
            "every job to finish under the new leader",
            interval=1,
        )
        after = pod_uids(kube, namespace)
        assert sorted(after) == sorted(f"{n}-worker-{i}" for n in jobs for i in range(2))
        assert {name: after[name] for name in before_takeover} == before_takeover  # none recreated
        assert writes(standby) > 0  # the new leader did the rest of the work
    finally:
        # The standby is the leader now: it becomes the session's operator for the tests that follow.
        adopt(operator, standby)


def test_a_restarted_leader_retakes_its_own_lease_at_once(kube: Kube, operator: RunningOperator) -> None:
    """In a cluster the identity is the pod's name ($POD_NAME), the same after a container restart: the new process
    must take the Lease it still holds at once, not wait out the dead process's Lease like a stranger."""
    from kubernetes import client

    holder = wait_until(lambda: lease_holder(kube), 60, "a lease holder")
    wait_until(lambda: value(scrape(operator), "trainingjob_operator_leader") == 1, 60, "the leader to lead")
    operator.stop(hard=True)
    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec
    expires = lease.renew_time.timestamp() + lease.lease_duration_seconds
    restarted = start_operator(
        operator.kubeconfig, operator.log_path.with_name("restarted.log"), "--leader-election-identity", holder
    )
    try:
        wait_until(lambda: healthy(f"{restarted.metrics_url}/readyz"), 60, "the restarted process to lead")
        assert time.time() < expires, "it waited for its own Lease to expire"
        retaken = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec
        assert retaken.holder_identity == holder
        assert retaken.lease_transitions == lease.lease_transitions  # the same holder: no transition
    finally:
        adopt(operator, restarted)
