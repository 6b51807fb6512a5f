"""The operator's informers across control-plane faults, against the real local control plane.

- A watch gap that only a re-list can close: the operator is frozen while the API server restarts, a worker pod is
  force-deleted and etcd is compacted; resuming from the old resourceVersion gets 410 Gone, the re-list's diff must
  turn the vanished pod into a delete, and the job must recreate it.
- kube-apiserver and etcd restarted (same data) under running jobs: every job converges, no pod twice.
- A frozen API server (every call hangs): /healthz on the metrics port turns 503 naming what is stuck, and 200 again
  once the API server runs.

These tests run a dedicated operator without leader election (tests/control_plane_faults.py says why).
"""

from __future__ import annotations

import time

import pytest

from tests.control_plane_faults import (
    CONTROL_PLANE,
    RELISTED,
    STUCK_AFTER,
    bump_etcd_revision,
    compact_etcd,
    frozen,
    health,
    log_since,
    restart,
)
from tests.jobs import create_job, get_job, job_manifest, job_pods, phase_of, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k

pytestmark = pytest.mark.integration
PODS_INFORMER = "pods.core/v1 in all namespaces"


def running_world(kube: Kube, namespace: str, name: str, size: int) -> list | None:
    """Exactly `size` pods of the job exist (terminating ones count), each live and Running."""
    pods = job_pods(kube, namespace, name)
    names = [p.metadata.name for p in pods]
    expected = [f"{name}-worker-{i}" for i in range(size)]
    ok = names == expected and all(p.metadata.deletion_timestamp is None and p.status.phase == "Running" for p in pods)
    return pods if ok else None


def test_a_pod_deleted_during_a_watch_gap_leaves_the_cache_through_a_relist(
    kube: Kube, namespace: str, faulted_operator: RunningOperator, restored_control_plane
) -> None:
    state = restored_control_plane
    create_job(kube, namespace, job_manifest("gap", workers=2, complete_after=None))
    wait_phase(kube, namespace, "gap", "Running")
    before = {
        p.metadata.name: p.metadata.uid
        for p in wait_until(lambda: running_world(kube, namespace, "gap", 2), 60, "2 Running workers")
    }
    offset = faulted_operator.log_path.stat().st_size
    started = time.monotonic()
    with frozen(faulted_operator.process.pid):
        # The restart closes every watch the operator had open; the deletion happens after that, so no watch
        # stream can ever carry its DELETED event to the operator. etcd's revision moves on while the API server is
        # down: the new one's watch cache starts past every resourceVersion the old one could have sent (a bookmark
        # sent just before the stop, read from the socket after SIGCONT, once let a resume from exactly the new
        # cache's start be served, DELETED event included, and no re-list happened). So every resume gets 410.
        restart(state, ("kube-apiserver", "kube-scheduler"), while_down=lambda: bump_etcd_revision(state))
        kube.core.delete_namespaced_pod("gap-worker-1", namespace, grace_period_seconds=0)
        wait_until(lambda: kube.pod_or_none(namespace, "gap-worker-1") is None, 30, "the pod to be gone")
        compact_etcd(state)  # the operator's resourceVersion is history now, in etcd too
    relisted = wait_until(
        lambda: f"{PODS_INFORMER}: {RELISTED}" in log_since(faulted_operator, offset), 90, "the pod informer to re-list"
    )
    assert relisted
    pods = wait_until(lambda: running_world(kube, namespace, "gap", 2), 90, "the gang to run again")
    status = wait_phase(kube, namespace, "gap", "Running")["status"]
    # The operator noticed the missing worker: a disruption, handled as the repair tests show (the gang restarts).
    assert status["disruptionCount"] == 1 and status["restartCount"] == 0, status
    assert {p.metadata.labels[k.LABEL_ATTEMPT] for p in pods} == {"1"}
    assert pods[1].metadata.uid != before["gap-worker-1"]
    print(f"watch gap closed by a re-list; job running again {time.monotonic() - started:.1f}s after the freeze")


def test_jobs_converge_after_the_api_server_and_etcd_restart(
    kube: Kube, namespace: str, faulted_operator: RunningOperator, restored_control_plane
) -> None:
    state = restored_control_plane
    steady = ["steady-0", "steady-1", "steady-2"]
    for name in steady:
        create_job(kube, namespace, job_manifest(name, workers=2, complete_after=None))
    create_job(kube, namespace, job_manifest("finishing", workers=2, complete_after="15s"))
    for name in steady:
        wait_until(lambda name=name: running_world(kube, namespace, name, 2), 90, f"{name} to run 2 workers")
    wait_phase(kube, namespace, "finishing", "Running")
    uids = {p.metadata.name: p.metadata.uid for name in steady for p in job_pods(kube, namespace, name)}
    offset = faulted_operator.log_path.stat().st_size
    started = time.monotonic()
    restart(state, CONTROL_PLANE)
    restarted = time.monotonic()
    wait_phase(kube, namespace, "finishing", "Succeeded", timeout=90)
    for name in steady:
        wait_until(lambda name=name: running_world(kube, namespace, name, 2), 60, f"{name} to keep 2 workers")
        assert phase_of(get_job(kube, namespace, name)) == "Running"
    assert {p.metadata.name: p.metadata.uid for name in steady for p in job_pods(kube, namespace, name)} == uids
    finishing = job_pods(kube, namespace, "finishing")
    assert len(finishing) <= 2 and {p.metadata.name for p in finishing} <= {"finishing-worker-0", "finishing-worker-1"}
    wait_until(lambda: health(faulted_operator)[0] == 200, 60, "/healthz to answer 200 again")
    # The operator kept one process throughout: it reconnected (and re-listed where it had to) on its own.
    assert faulted_operator.process.poll() is None
    log = log_since(faulted_operator, offset)
    print(
        f"control plane restarted in {restarted - started:.1f}s; converged {time.monotonic() - restarted:.1f}s later; "
        f"re-lists: {log.count(RELISTED)}, retried watch errors: {log.count('retrying in')}"
    )


def test_a_frozen_api_server_fails_liveness_and_recovers(
    kube: Kube, namespace: str, faulted_operator: RunningOperator, restored_control_plane
) -> None:
    state = restored_control_plane
    create_job(kube, namespace, job_manifest("frozen", workers=1, complete_after=None))
    wait_phase(kube, namespace, "frozen", "Running")
    wait_until(lambda: health(faulted_operator)[0] == 200, 30, "/healthz to answer 200")
    answers: list[tuple[int, str]] = []

    def unhealthy() -> tuple[int, str] | None:
        answers.append(health(faulted_operator))
        return answers[-1] if answers[-1][0] == 503 else None

    with frozen(state.pids["kube-apiserver"]):
        frozen_at = time.monotonic()
        _, body = wait_until(unhealthy, 3 * STUCK_AFTER, "/healthz to fail", interval=0.5)
        noticed = time.monotonic() - frozen_at
    assert "watches without progress" in body or "the reconcile of" in body, body
    assert f"(bound {STUCK_AFTER}s)" in body, body
    # Not before the bound: the probe must not fail a merely quiet operator.
    assert noticed >= STUCK_AFTER - 5, (noticed, answers)
    resumed_at = time.monotonic()
    wait_until(lambda: health(faulted_operator)[0] == 200, 60, "/healthz to answer 200 after SIGCONT")
    recovered = time.monotonic() - resumed_at
    assert faulted_operator.process.poll() is None
    assert running_world(kube, namespace, "frozen", 1)
    print(f"/healthz 503 after {noticed:.1f}s frozen ({body.strip()}); 200 again {recovered:.1f}s after SIGCONT")
