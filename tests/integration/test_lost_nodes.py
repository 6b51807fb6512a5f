"""A worker stuck Terminating is reported after a bound, and force-deleted only when its node is lost.

The node is a kwok node of the test's own (the four shared ones stay Ready): its kubelet "goes away" through the
tj-node-not-ready stage (annotation sim.ml.example.com/not-ready), and worker pods hold their deletion through
sim.ml.example.com/delete-delay, as pods on a node whose kubelet is gone do. The session operator runs with
--stuck-after 5 and --force-delete-after 20 (tests/operator_harness.py).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.test_blocked_workers import REACT, blocked, warnings
from tests.jobs import SIM, create_job, event_reasons, get_job, job_manifest, job_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import FORCE_DELETE_AFTER_SECONDS, STUCK_AFTER_SECONDS
from trainingjob.api import constants as k
from trainingjob.cluster.manifests import fake_node

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
NODE_LABEL = "ml.example.com/test-node"
NODE_GRACE_SECONDS = 50  # kube-controller-manager's --node-monitor-grace-period (its default)


@pytest.fixture
def own_node(kube: Kube, namespace: str) -> Iterator[str]:
    """A Ready kwok node only this test's workers are placed on (by its label)."""
    name = add_node(kube, f"tj-lost-{namespace}", namespace)
    yield name
    for pod in kube.core.list_namespaced_pod(namespace).items:  # pods held Terminating would outlive the test
        try:
            kube.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise
    kube.core.delete_node(name)


@pytest.fixture
def spare_node(kube: Kube, namespace: str, own_node: str) -> Iterator[str]:
    """A second node for this test's workers, cordoned until the test opens it (so the first ones land on own_node)."""
    name = add_node(kube, f"tj-spare-{namespace}", namespace, unschedulable=True)
    yield name
    kube.core.delete_node(name)


def add_node(kube: Kube, name: str, namespace: str, unschedulable: bool = False) -> str:
    node = fake_node(0)
    node["metadata"]["name"] = name
    node["metadata"]["labels"].update({"kubernetes.io/hostname": name, NODE_LABEL: namespace})
    node["spec"]["unschedulable"] = unschedulable
    kube.core.create_node(node)
    wait_until(lambda: node_ready(kube, name) == "True", REACT, f"node {name} to be Ready")
    return name


def node_ready(kube: Kube, name: str) -> str | None:
    conditions = kube.core.read_node(name).status.conditions or []
    return next((c.status for c in conditions if c.type == "Ready"), None)


def set_not_ready(kube: Kube, name: str, not_ready: bool) -> None:
    value = "true" if not_ready else None
    kube.core.patch_node(name, {"metadata": {"annotations": {f"{SIM}/not-ready": value}}})
    wait_until(lambda: node_ready(kube, name) == ("False" if not_ready else "True"), REACT, f"{name} Ready change")


def held_job(name: str, node_label: str, **spec: Any) -> dict[str, Any]:
    annotations = {f"{SIM}/delete-delay": "1h"}
    scheduling = {"nodeSelector": {NODE_LABEL: node_label}}
    failure = {"restartStrategy": "Worker"}
    return job_manifest(
        name,
        workers=2,
        complete_after=None,
        podAnnotations=annotations,
        scheduling=scheduling,
        failurePolicy=failure,
        **spec,
    )


def wait_reported(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The job once its Blocked condition reports a worker stuck Terminating."""

    def reported() -> dict[str, Any] | None:
        job = get_job(kube, namespace, name)
        condition = blocked(job)
        return job if condition and condition["reason"] == "PodStuckTerminating" else None

    return wait_until(reported, REACT + STUCK_AFTER_SECONDS, "the stuck worker to be reported")


def pod_uid(kube: Kube, namespace: str, name: str) -> str | None:
    pod = kube.pod_or_none(namespace, name)
    return pod.metadata.uid if pod else None


def test_a_worker_stuck_on_a_lost_node_is_reported_then_forced_and_recreated(
    kube: Kube, namespace: str, own_node: str
) -> None:
    create_job(kube, namespace, held_job("lost", namespace))
    wait_phase(kube, namespace, "lost", "Running", timeout=REACT)
    set_not_ready(kube, own_node, True)
    stuck_uid = pod_uid(kube, namespace, "lost-worker-1")
    kube.core.delete_namespaced_pod("lost-worker-1", namespace, grace_period_seconds=1)  # e.g. a taint eviction

    job = wait_reported(kube, namespace, "lost")
    assert f"node {own_node} is NotReady" in blocked(job)["message"]
    assert pod_uid(kube, namespace, "lost-worker-1") == stuck_uid, "reported before it is forced"
    wait_until(lambda: "PodStuckTerminating" in warnings(kube, namespace, "lost"), REACT, "a Warning Event")
    wait_until(
        lambda: pod_uid(kube, namespace, "lost-worker-1") not in (stuck_uid,),
        REACT + FORCE_DELETE_AFTER_SECONDS,
        "the stuck worker to be force-deleted",
    )
    assert "PodForceDeleted" in warnings(kube, namespace, "lost")
    # Its replacement waits for a node (the lost one is tainted not-ready) and runs once the node is back.
    set_not_ready(kube, own_node, False)
    job = wait_phase(kube, namespace, "lost", "Running", timeout=REACT)
    assert job["status"]["disruptionCount"] == 1
    assert len([p for p in job_pods(kube, namespace, "lost") if p.metadata.deletion_timestamp is None]) == 2


def test_a_worker_stuck_on_a_ready_node_is_reported_never_forced(kube: Kube, namespace: str, own_node: str) -> None:
    create_job(kube, namespace, held_job("held", namespace))
    wait_phase(kube, namespace, "held", "Running", timeout=REACT)
    stuck_uid = pod_uid(kube, namespace, "held-worker-1")
    kube.core.delete_namespaced_pod("held-worker-1", namespace, grace_period_seconds=1)

    job = wait_reported(kube, namespace, "held")
    assert f"node {own_node} is Ready" in blocked(job)["message"]
    # Well past the force bound, with reconciles at it (the operator requeues there), the pod is still there: a
    # Ready kubelet is never bypassed.
    deleted_at = kube.core.read_namespaced_pod("held-worker-1", namespace).metadata.deletion_timestamp
    wait_until(
        lambda: (
            datetime.datetime.now(datetime.UTC)
            > deleted_at + datetime.timedelta(seconds=FORCE_DELETE_AFTER_SECONDS + 5)
        ),
        REACT + FORCE_DELETE_AFTER_SECONDS,
        "the force bound to pass",
        interval=1,
    )
    assert pod_uid(kube, namespace, "held-worker-1") == stuck_uid
    assert "PodForceDeleted" not in warnings(kube, namespace, "held")


# Kubernetes' taints on a node whose kubelet is NotReady or unreachable; pods tolerating them for N seconds are
# evicted N seconds after the node lifecycle controller taints it (DefaultTolerationSeconds gives every pod 300 s).
LOST_NODE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def lost_node_job(name: str, namespace: str, toleration_seconds: int | None = None) -> dict[str, Any]:
    """Two workers on this test's nodes, whose deletion a lost kubelet never finishes (kwok holds them
    Terminating); with `toleration_seconds`, evicted that soon after their node is tainted."""
    scheduling: dict[str, Any] = {"nodeSelector": {NODE_LABEL: namespace}}
    if toleration_seconds is not None:
        scheduling["tolerations"] = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": toleration_seconds}
            for key in LOST_NODE_TAINTS
        ]
    annotations = {f"{SIM}/delete-delay": "1h"}
    return job_manifest(name, workers=2, complete_after=None, podAnnotations=annotations, scheduling=scheduling)


def live_pods_on(kube: Kube, namespace: str, name: str) -> dict[str, tuple[str | None, str, str]]:
    """The job's live pods: name -> (node, phase, attempt label)."""
    return {
        p.metadata.name: (p.spec.node_name, p.status.phase, p.metadata.labels.get(k.LABEL_ATTEMPT, "?"))
        for p in job_pods(kube, namespace, name)
        if p.metadata.deletion_timestamp is None
    }


def test_workers_on_a_lost_node_are_evicted_and_the_gang_restarts_on_another_node(
    kube: Kube, namespace: str, own_node: str, spare_node: str
) -> None:
    create_job(kube, namespace, lost_node_job("moved", namespace, toleration_seconds=5))
    wait_phase(kube, namespace, "moved", "Running", timeout=REACT)
    first = live_pods_on(kube, namespace, "moved")
    assert {node for node, _, _ in first.values()} == {own_node}, first
    kube.core.patch_node(spare_node, {"spec": {"unschedulable": False}})
    set_not_ready(kube, own_node, True)

    def moved() -> dict[str, Any] | None:
        pods = live_pods_on(kube, namespace, "moved")
        job = get_job(kube, namespace, "moved") or {}
        where = {(node, phase) for node, phase, _ in pods.values()}
        on_spare = len(pods) == 2 and where == {(spare_node, "Running")}
        return job if on_spare and (job.get("status") or {}).get("phase") == "Running" else None

    # The node lifecycle controller taints the node, the taint eviction controller deletes the workers 5 s later,
    # the lost kubelet never finishes them, the operator forces them after --force-delete-after, the gang restarts.
    job = wait_until(moved, 3 * REACT + FORCE_DELETE_AFTER_SECONDS, "the gang to run again on the spare node")
    status = job["status"]
    assert status["restartCount"] == 0, status  # a lost node is not the job's failure
    assert status["disruptionCount"] >= 1 and status["attempt"] >= 1, status
    attempts = {attempt for _, _, attempt in live_pods_on(kube, namespace, "moved").values()}
    assert attempts == {str(status["attempt"])}
    assert "PodForceDeleted" in warnings(kube, namespace, "moved")
    reasons = event_reasons(kube, namespace, "moved")
    print(f"lost node: disruptions {status['disruptionCount']}, attempt {status['attempt']}; events {reasons}")


def silence_kubelet(kube: Kube, node: str) -> None:
    """Make the node's kubelet go away for good, as a crashed machine's does: its Lease in kube-node-lease is taken by
    a holder that never renews it, so kwok (which renews only Leases it holds) stops heartbeating the node, and after
    the node lifecycle controller's grace period (50 s) the node turns Unknown and its pods not Ready."""
    coordination = client.CoordinationV1Api(kube.api)
    renewed = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": "a-kubelet-gone-for-good", "leaseDurationSeconds": 3600, "renewTime": renewed}
    coordination.patch_namespaced_lease(node, "kube-node-lease", {"spec": spec})


def test_workers_on_a_lost_node_wait_visibly_for_their_eviction(kube: Kube, namespace: str, own_node: str) -> None:
    create_job(kube, namespace, lost_node_job("stranded", namespace))  # the default toleration: 300 s
    wait_phase(kube, namespace, "stranded", "Running", timeout=REACT)
    uids = {p.metadata.name: p.metadata.uid for p in job_pods(kube, namespace, "stranded")}
    silence_kubelet(kube, own_node)

    def reported() -> dict[str, Any] | None:
        job = get_job(kube, namespace, "stranded")
        condition = blocked(job)
        return job if condition and condition["reason"] == "NodeNotReady" else None

    job = wait_until(reported, NODE_GRACE_SECONDS + 2 * REACT, "the job to say its workers' node is lost")
    assert node_ready(kube, own_node) == "Unknown"
    message = blocked(job)["message"]
    # The worker the controller marked first is named (the condition takes the first by index once both are).
    assert re.match(r"worker ([01]) \(pod stranded-worker-\1\) may not be running: ", message), message
    assert (
        f"node {own_node} is unreachable (Ready Unknown, NodeStatusUnknown) since" in message
        and "tolerationSeconds" in message
    )
    assert job["status"]["phase"] == "Running" and message in job["status"]["message"]
    wait_until(lambda: "NodeNotReady" in warnings(kube, namespace, "stranded"), REACT, "a Warning Event")
    # Evicting is Kubernetes' call, after the toleration: the operator deleted nothing.
    assert {p.metadata.name: p.metadata.uid for p in job_pods(kube, namespace, "stranded")} == uids
