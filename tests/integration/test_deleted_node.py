"""A Node object deleted (`kubectl delete node`) under a running gang: the job converges without manual action.

The workers run on a kwok node of the test's own (labelled for this namespace); a second one, cordoned until the
test opens it, takes them afterwards. Once the Node is gone, kube-controller-manager's pod garbage collector deletes
the pods bound to it (orphaned pods: force-deleted after its quarantine, 40 s), the operator counts that as a
disruption and restarts the gang, which the scheduler places on the other node. A watch of the namespace records
every pod ever created: each worker and attempt has exactly one pod, and the gang restarts once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.integration.test_blocked_workers import REACT
from tests.integration.test_lost_nodes import add_node, live_pods_on, lost_node_job
from tests.jobs import create_job, event_reasons, get_job, wait_phase
from tests.kill_points import PodHistory
from tests.kube import Kube, wait_until
from tests.operator_harness import FORCE_DELETE_AFTER_SECONDS

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
POD_GC_QUARANTINE_SECONDS = 40  # kube-controller-manager's pod GC waits this long before deleting orphaned pods


@pytest.fixture
def two_nodes(kube: Kube, namespace: str) -> Iterator[tuple[str, str]]:
    """(the node the test deletes, the spare, cordoned until the test opens it); both gone afterwards."""
    doomed = add_node(kube, f"tj-deleted-{namespace}", namespace)
    spare = add_node(kube, f"tj-kept-{namespace}", namespace, unschedulable=True)
    try:
        yield doomed, spare
    finally:
        for pod in kube.core.list_namespaced_pod(namespace).items:
            with contextlib.suppress(ApiException):
                kube.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        for node in (doomed, spare):
            with contextlib.suppress(ApiException):
                kube.core.delete_node(node)


@pytest.mark.timeout(900)
def test_a_deleted_node_moves_the_gang_once_without_manual_action(
    kube: Kube, namespace: str, two_nodes: tuple[str, str]
) -> None:
    doomed, spare = two_nodes
    history = PodHistory(kube, namespace)
    history.start()
    try:
        assert history.listed.wait(60), "the pod watch to list"
        create_job(kube, namespace, lost_node_job("orphaned", namespace))
        wait_phase(kube, namespace, "orphaned", "Running", timeout=REACT)
        first = live_pods_on(kube, namespace, "orphaned")
        assert {node for node, _, _ in first.values()} == {doomed}, first
        kube.core.patch_node(spare, {"spec": {"unschedulable": False}})
        kube.core.delete_node(doomed)

        def moved() -> dict[str, Any] | None:
            pods = live_pods_on(kube, namespace, "orphaned")
            status = (get_job(kube, namespace, "orphaned") or {}).get("status") or {}
            where = {(node, phase) for node, phase, _ in pods.values()}
            settled = len(pods) == 2 and where == {(spare, "Running")} and status.get("phase") == "Running"
            return status if settled and {a for _, _, a in pods.values()} == {str(status.get("attempt"))} else None

        bound = POD_GC_QUARANTINE_SECONDS + FORCE_DELETE_AFTER_SECONDS + 4 * REACT
        status = wait_until(moved, bound, "the gang to run again on the other node", interval=1)
        assert doomed not in {node.metadata.name for node in kube.core.list_node().items}, "the node came back"
        # Settled: a few more reconciles must change nothing (no second restart, no pod recreated).
        wait_until(lambda: len(history.seen) >= 4, REACT, "the watch to see the new pods")
        wait_phase(kube, namespace, "orphaned", "Running", timeout=REACT)
    finally:
        history.stopping.set()
    assert not history.duplicates(), f"two pods for one worker and attempt: {history.duplicates()}"
    attempts = sorted({key[3] for key in history.seen.values()})
    assert attempts == ["0", str(status["attempt"])], (attempts, history.seen)
    assert len(history.seen) == 4, history.seen  # 2 workers x (the first attempt, the one on the spare node)
    assert (status.get("restartCount", 0), status["disruptionCount"], status["attempt"]) == (0, 1, 1), status
    print(f"deleted node: status {status}; events {event_reasons(kube, namespace, 'orphaned')}")
