"""Two replicas: only the Lease holder reconciles; when it dies the standby takes over, without duplicates.

Pod names are deterministic, so equal names alone cannot show a duplicate or a recreated pod: the test also checks
that every pod the old leader created keeps its UID, and that the standby wrote nothing while it was standing by.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

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
    """API writes the replica's reconciler made (its client counts every request, Lease renewals included). A
    question asked by a create changes nothing: every replica asks at its start whether GPU telemetry may watch
    EndpointSlices (two SelfSubjectAccessReviews)."""
    samples = scrape(operator)
    requests = "trainingjob_api_requests_total"
    questions = value(samples, requests, verb="create", resource="selfsubjectaccessreviews")
    return sum(value(samples, requests, verb=verb) for verb in WRITE_VERBS) - questions


def adopt(session_operator: RunningOperator, successor: RunningOperator) -> None:
    """The successor becomes the session's operator for the tests that follow: all of it, so its health URL is the
    one probed and a revive starts it again with its own arguments (e.g. its Lease identity)."""
    for field in dataclasses.fields(successor):
        setattr(session_operator, field.name, getattr(successor, field.name))


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
    restarted = start_operator(
        operator.kubeconfig, operator.log_path.with_name("restarted.log"), "--leader-election-identity", holder
    )
    try:
        wait_until(lambda: healthy(f"{restarted.metrics_url}/readyz"), 60, "the restarted process to lead")
        # It took the Lease at its first look (one read, then renewals that replace it unread). A stranger waits a
        # whole Lease from its first look, however old the Lease is, reading it every retry period. (Comparing the
        # time with the dead process's renewTime failed at load 13-14: the new process took longer than the Lease
        # to import and start.)
        reads = value(scrape(restarted), "trainingjob_api_requests_total", verb="get", resource="leases")
        assert reads == 1, f"it read the Lease {reads:.0f} times before it led: it waited for it to expire"
        retaken = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec
        assert retaken.holder_identity == holder
        assert retaken.lease_transitions == lease.lease_transitions  # the same holder: no transition
    finally:
        adopt(operator, restarted)


async def renew_beside_busy_writers(kubeconfig: Path, namespace: str) -> tuple[bool, list[str]]:
    """Take every connection of the operator's writers' pool (held watches), then lead on the Lease client the
    operator builds beside it for 3 s, past the renew deadline. (Whether a writer waited; the leader's edges.)"""
    from kubernetes_asyncio import client, config

    from trainingjob.config import OperatorConfig
    from trainingjob.operator.process import open_clients, writer_connections
    from trainingjob.operator.runtime.leader import LeaderElector, LeaseSettings

    await config.load_kube_config(config_file=str(kubeconfig))
    operator_config = OperatorConfig(max_concurrent_creates=1, max_concurrent_reconciles=1)
    clients = open_clients(operator_config, lambda *_: None)
    core = client.CoreV1Api(clients.api)
    held = []
    edges: list[str] = []
    try:
        for _ in range(writer_connections(operator_config)):
            held.append(await core.list_namespaced_config_map(namespace, watch=True, _preload_content=False))
        try:
            async with asyncio.timeout(1):
                await core.read_namespace(namespace)
            writer_waited = False
        except TimeoutError:
            writer_waited = True
        timing = {"lease_duration": 4.0, "renew_deadline": 2.0, "retry_period": 0.2}
        settings = LeaseSettings(namespace, "busy-writers", identity="busy-writers", **timing)
        elector = LeaderElector(client.CoordinationV1Api(clients.lease), settings)
        leading = asyncio.Event()
        task = asyncio.create_task(elector.run(leading.set, lambda: edges.append("stopped")))
        try:
            await asyncio.wait_for(leading.wait(), 10)
            edges.append("started")
            await asyncio.sleep(3)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return writer_waited, edges
    finally:
        for response in held:
            response.close()
        for api in (clients.api, clients.watch_api, clients.lease):
            await api.close()


def test_the_leader_renews_its_lease_while_every_writer_connection_is_busy(kube: Kube, namespace: str) -> None:
    """A creation burst can hold every connection of the writers' pool for seconds; a renewal queued behind it
    missed the renew deadline once at 1000 x 8 and the healthy leader stopped. The Lease has a client of its own."""
    writer_waited, edges = asyncio.run(renew_beside_busy_writers(kube.kubeconfig, namespace))
    assert writer_waited, "the test did not take every writer connection"
    assert edges == ["started"], edges
    from kubernetes import client

    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease("busy-writers", namespace).spec
    assert lease.holder_identity == "busy-writers"
    assert (lease.renew_time - lease.acquire_time).total_seconds() >= 2.5  # renewed all along, not just acquired


def test_a_leader_stopped_by_sigterm_stops_reconciling_before_it_hands_over(
    kube: Kube, operator: RunningOperator
) -> None:
    """A rollout SIGTERMs the leader; it releases its Lease so that a standby need not wait for expiry. Released
    while its reconcilers still ran, the standby could lead beside them: the release must come after they stopped."""
    wait_until(lambda: value(scrape(operator), "trainingjob_operator_leader") == 1, 60, "the leader to lead")
    leader = dataclasses.replace(operator)  # adopt() below rewrites `operator` in place
    offset = leader.log_path.stat().st_size
    standby = start_operator(leader.kubeconfig, leader.log_path.with_name("sigterm-standby.log"))
    try:
        leader.stop()
        assert leader.process.returncode == 0
        wait_until(lambda: value(scrape(standby), "trainingjob_operator_leader") == 1, 30, "the standby to lead")
        messages = [
            str(json.loads(line).get("message"))
            for line in leader.log_path.read_bytes()[offset:].decode(errors="replace").splitlines()
            if line.startswith("{")
        ]
        released = f"released the leader lease {OPERATOR_NAMESPACE}/{LEASE}"
        assert released in messages and "reconcilers stopped" in messages, messages[-10:]
        assert messages.index("reconcilers stopped") < messages.index(released), messages[-10:]
    finally:
        adopt(operator, standby)
