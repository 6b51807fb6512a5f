"""Leader election through an API server outage longer than the leader's Lease (issue 41's control-plane faults).

Two replicas with leader election, as in test_leader_election.py, while jobs run on kwok nodes. The API server is
stopped for longer than the Lease's duration (15 s), so the leader cannot renew: it must notice within its renew
deadline (10 s) and exit (70) before the API server is back, for the standby may take the Lease the moment it can
read it. The exited replica is started again at once with its identity, as the kubelet restarts a container, while
the API server is still down: it must wait for the API server (it used to die of a traceback in its preflight, and
then, just after the API server started, of a 403 while the API server's RBAC caches synced). Afterwards exactly one
replica leads (the restarted one retakes the Lease it still holds, or the standby takes it), the other never
reconciled, and the jobs converge without a pod created twice or recreated: pod names are deterministic, so the pods'
UIDs show a recreation; the old leader's exit before the API server came back shows it wrote nothing after its Lease.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from tests.control_plane_faults import restart
from tests.integration.test_leader_election import adopt, lease_holder, pod_uids, writes
from tests.jobs import create_job, get_job, job_manifest, phase_of
from tests.kube import Kube, wait_until
from tests.metrics import scrape, value
from tests.operator_harness import OPERATOR_NAMESPACE, RunningOperator, start_operator, wait_healthy
from trainingjob.operator.runtime.leader import LeaseSettings

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
LEASE = "trainingjob-operator"
LEASE_SECONDS = LeaseSettings("").lease_duration
RENEW_DEADLINE = LeaseSettings("").renew_deadline
OUTAGE = ("kube-apiserver", "kube-scheduler")  # the scheduler restarts with it (control_plane_faults.CLIENTS)
LOST_LEASE_EXIT = 70  # process.stop_on_lost_lease
RUNNING = [f"outage-run-{i}" for i in range(3)]  # run until told: their pods must live through it all
FINISHING = [f"outage-end-{i}" for i in range(2)]  # complete during or after the outage: the new leader finishes them
WORKERS = 2
STANDBY = "outage-standby"


def lease(kube: Kube) -> object:
    from kubernetes import client

    return client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE).spec


def log_records(path: Path, offset: int) -> list[dict]:
    """The JSON records of an operator's log from `offset` (a traceback's lines are not JSON: see tracebacks)."""
    records = []
    for line in path.read_bytes()[offset:].decode(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def stamped(records: list[dict], text: str) -> str:
    """The timestamp of the first record whose message holds `text` ('' when none)."""
    return next((r["timestamp"] for r in records if text in str(r.get("message", ""))), "")


def errors(records: list[dict]) -> list[str]:
    return [str(r.get("message", ""))[:200] for r in records if r.get("level") in ("error", "critical")]


def leading(running: RunningOperator) -> float:
    return value(scrape(running), "trainingjob_operator_leader")


def leading_or_none(running: RunningOperator) -> float | None:
    try:
        return leading(running)
    except OSError:
        return None


@pytest.mark.timeout(400)
def test_the_leader_stops_when_an_outage_outlasts_its_lease_and_the_standby_takes_over(
    kube: Kube, namespace: str, operator: RunningOperator, restored_control_plane: object
) -> None:
    state = restored_control_plane
    began = time.monotonic()
    wait_until(lambda: leading(operator) == 1, 60, "the session's operator to lead")
    old = lease_holder(kube)  # read once it leads: before, the Lease may name a holder from before this session
    leader = dataclasses.replace(operator)  # a copy: adopt() below rewrites `operator` in place
    offset = leader.log_path.stat().st_size
    standby = start_operator(
        leader.kubeconfig, leader.log_path.with_name("outage-standby.log"), "--leader-election-identity", STANDBY
    )
    replicas = {"standby": standby}
    try:
        for name in RUNNING:
            create_job(kube, namespace, job_manifest(name, workers=WORKERS, complete_after=None))
        for name in FINISHING:
            create_job(kube, namespace, job_manifest(name, workers=WORKERS, complete_after="15s"))
        every = RUNNING + FINISHING
        wait_until(
            lambda: all(phase_of(get_job(kube, namespace, n)) == "Running" for n in every), 90, "every job Running"
        )
        assert writes(standby) == 0 and leading(standby) == 0
        before = lease(kube)
        running_pods = pod_uids(kube, namespace)
        assert len(running_pods) == len(every) * WORKERS

        exited: dict[str, float] = {}
        stopped = time.monotonic()  # the API server refuses connections from its stop on (its shutdown takes s)
        revived_log = leader.log_path.with_name("outage-revived.log")

        def outlast_the_lease() -> None:
            """While the API server is down: the leader must exit on its own within its renew deadline, and is
            started again at once with its identity (the pod's name), as the kubelet restarts a container that
            exited; the API server stays down for longer than the Lease in any case."""
            code = wait_until(lambda: leader.process.poll(), LEASE_SECONDS * 3, "the leader to stop on its own")
            exited["after"], exited["code"] = time.monotonic() - stopped, code
            replicas["revived"] = start_operator(
                leader.kubeconfig, revived_log, "--leader-election-identity", old, wait=False
            )
            time.sleep(max(0.0, stopped + LEASE_SECONDS + 2 - time.monotonic()))
            exited["down"] = time.monotonic() - stopped

        restart(state, OUTAGE, while_down=outlast_the_lease)
        back = time.monotonic()
        assert exited["code"] == LOST_LEASE_EXIT, exited
        assert exited["after"] <= RENEW_DEADLINE + 5, exited  # its last renewal preceded the stop by ≤ one period
        revived = replicas["revived"]
        for name, replica in replicas.items():
            assert replica.process.poll() is None, f"the {name} replica exited:\n{replica.log_tail()}"
        wait_healthy(revived)
        # Exactly one leader: the revived replica retakes the Lease it still holds at once, or the standby takes
        # it once it has seen it unrenewed for a whole Lease; the other stands by.
        chosen = wait_until(
            lambda: [name for name, replica in replicas.items() if leading(replica) == 1], 60, "a new leader"
        )
        took_over = time.monotonic() - back
        wait_until(
            lambda: all(phase_of(get_job(kube, namespace, n)) == "Succeeded" for n in FINISHING),
            90,
            "the finishing jobs to succeed under the new leader",
            interval=1,
        )
        converged = time.monotonic() - back
        for name in RUNNING:
            assert phase_of(get_job(kube, namespace, name)) == "Running", name
        after = pod_uids(kube, namespace)
        assert after == running_pods, "a pod was created again or recreated"
        leads = [name for name, replica in replicas.items() if leading(replica) == 1]
        assert leads == chosen and len(leads) == 1, leads
        now = lease(kube)
        assert now.holder_identity == (old if leads == ["revived"] else STANDBY)
        assert now.lease_transitions == before.lease_transitions + (leads == ["standby"])
        records = {
            "leader": log_records(leader.log_path, offset),
            "standby": log_records(standby.log_path, 0),
            "revived": log_records(revived.log_path, 0),
        }
        lost, took = stamped(records["leader"], "leadership lost"), stamped(records[leads[0]], "became the leader")
        assert lost and took and lost < took, (lost, took)
        idle = "standby" if leads == ["revived"] else "revived"
        assert not stamped(records[idle], "reconciled"), f"the {idle} replica reconciled"
        for name, path in (("leader", leader.log_path), ("standby", standby.log_path), ("revived", revived.log_path)):
            text = path.read_bytes()[offset if name == "leader" else 0 :].decode(errors="replace")
            assert "Traceback" not in text, f"{name}: {text[text.index('Traceback') :][:2000]}"
        assert errors(records["leader"]) == [
            f"lost the leader lease {OPERATOR_NAMESPACE}/{LEASE}",
            "leadership lost; exiting so that only the new leader writes",
        ]
        print(
            f"leader outage: API server down {exited['down']:.1f}s (lease {LEASE_SECONDS:.0f}s); the leader exited "
            f"{exited['after']:.1f}s after the stop (code {exited['code']}); lost {lost}; the {leads[0]} replica led "
            f"at {took}, {took_over:.1f}s after the API server was back; jobs converged {converged:.1f}s after it; "
            f"errors logged: standby {errors(records['standby'])}, revived {errors(records['revived'])}; "
            f"{time.monotonic() - began:.0f}s in all"
        )
    finally:
        # The replica that leads (the standby when unknown) becomes the session's operator; the other stops.
        successor = "revived" if "revived" in replicas and replicas["revived"].process.poll() is None else "standby"
        if successor == "revived" and leading_or_none(replicas["revived"]) != 1:
            successor = "standby"
        adopt(operator, replicas.pop(successor))
        for replica in (*replicas.values(), leader):
            if replica.process.poll() is None:
                replica.stop()
