"""What the planner learns from a pod (`pod_view`) and how job conditions are merged (`merge_conditions`).

Proves: realistic pod bodies (running, OOM-killed, evicted, being deleted, unschedulable, unlabelled) reduce to the
exact facts the planner decides on (index, attempt, spec-hash, phase, exit code, reason, disruption, placement);
and merge_conditions keeps lastTransitionTime while a condition's status holds, moves it when the status flips,
stamps observedGeneration, keeps conditions no longer desired, and returns a stable order.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.builders.service import ServiceView
from trainingjob.reconcile.conditions import CONDITION_ORDER, DesiredCondition, merge_conditions
from trainingjob.reconcile.observed import ObservedChildren, PodView, pod_view

T0, T1, T2 = "2024-05-01T10:00:00Z", "2024-05-01T10:05:00Z", "2024-05-01T11:00:00Z"


def pod(index: int = 1, attempt: int = 2, status: dict | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"mnist-worker-{index}",
            "namespace": "ml",
            "uid": f"uid-{index}",
            "labels": {
                k.LABEL_JOB_NAME: "mnist",
                k.LABEL_MANAGED_BY: k.MANAGED_BY,
                k.LABEL_ROLE: "worker",
                k.LABEL_WORKER_INDEX: str(index),
                k.LABEL_ATTEMPT: str(attempt),
                k.LABEL_SPEC_HASH: "0123456789abcdef",
            },
            **metadata,
        },
        "spec": {"nodeName": "node-3", "containers": [{"name": "trainer", "image": "train:1"}]},
        "status": status or {},
    }


RUNNING = {
    "phase": "Running",
    "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
    "containerStatuses": [{"name": "trainer", "restartCount": 0, "state": {"running": {"startedAt": T0}}}],
}
OOM_KILLED = {
    "phase": "Failed",
    "containerStatuses": [
        {
            "name": "trainer",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": T0, "finishedAt": T1}},
        }
    ],
}
EVICTED = {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory.",
    "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
}
UNSCHEDULABLE_MESSAGE = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": UNSCHEDULABLE_MESSAGE}
    ],
}


def test_running_pod() -> None:
    assert pod_view(pod(status=RUNNING)) == PodView(
        name="mnist-worker-1",
        index=1,
        attempt=2,
        spec_hash="0123456789abcdef",
        phase="Running",
        node_name="node-3",
        uid="uid-1",
    )
    view = pod_view(pod(status=RUNNING))
    assert view.live and view.active and not view.disrupted


def test_a_pod_a_simulator_plays_says_so() -> None:
    """The local cluster's kwok stages give the containers they play an imageID of sim://: no code runs there."""
    played = {**RUNNING, "containerStatuses": [{"name": "trainer", "imageID": "sim://train:1", "state": {}}]}
    assert pod_view(pod(status=played)).simulated is True
    real = {**RUNNING, "containerStatuses": [{"name": "trainer", "imageID": "local://train:1", "state": {}}]}
    assert pod_view(pod(status=real)).simulated is False


def test_oom_killed_pod() -> None:
    view = pod_view(pod(status=OOM_KILLED))
    assert (view.phase, view.exit_code, view.reason) == ("Failed", 137, "OOMKilled")
    assert view.message is None
    assert not view.disrupted
    assert view.live and not view.active


def test_terminated_message_and_restart_count() -> None:
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "trainer", "restartCount": 2, "state": {"terminated": {"exitCode": 1, "message": "boom"}}},
            {"name": "sidecar", "restartCount": 1, "state": {"running": {}}},
        ],
    }
    view = pod_view(pod(status=status))
    assert (view.exit_code, view.reason, view.message, view.restart_count) == (1, None, "boom", 3)


def test_evicted_pod_is_disrupted() -> None:
    view = pod_view(pod(status=EVICTED))
    assert view.disrupted
    assert (view.phase, view.reason, view.message) == ("Failed", "Evicted", "The node was low on resource: memory.")
    assert view.exit_code is None


@pytest.mark.parametrize(
    ("status", "disrupted"),
    [
        ({"phase": "Failed", "reason": "Evicted"}, True),
        ({"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}, True),
        ({"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "False"}]}, False),
        ({"phase": "Failed", "reason": "DeadlineExceeded"}, False),
        (OOM_KILLED, False),
    ],
)
def test_disruption_sources(status: dict, disrupted: bool) -> None:
    assert pod_view(pod(status=status)).disrupted is disrupted


def test_pod_being_deleted() -> None:
    view = pod_view(pod(status=RUNNING, deletionTimestamp=T1))
    assert view.deleting
    assert not view.live and not view.active
    assert view.phase == "Running"


def test_unschedulable_pod_keeps_the_scheduler_message() -> None:
    view = pod_view(pod(status=UNSCHEDULABLE))
    assert view.unschedulable_message == UNSCHEDULABLE_MESSAGE
    assert view.phase == "Pending" and view.active


@pytest.mark.parametrize(
    "condition",
    [
        {"type": "PodScheduled", "status": "True"},
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": "gated"},
    ],
)
def test_only_unschedulable_reason_sets_the_message(condition: dict) -> None:
    assert pod_view(pod(status={"phase": "Pending", "conditions": [condition]})).unschedulable_message is None


def test_pod_without_labels_or_status() -> None:
    view = pod_view({"metadata": {"name": "stray"}})
    assert (view.name, view.index, view.attempt, view.spec_hash) == ("stray", -1, -1, "")
    assert (view.phase, view.node_name, view.uid, view.restart_count) == ("Pending", None, "", 0)
    assert not view.deleting and not view.disrupted


def test_observed_children_from_cache_sorts_pods_by_index() -> None:
    views = [pod_view(pod(index=i, status=RUNNING)) for i in (10, 0, 2)]  # by name, 10 would come before 2
    service = ServiceView((("dist", 29500, 29500, "TCP"),), selects_pods=True)
    observed = ObservedChildren.from_cache(views, iter([service]), [{"hostfile": "x"}, {"other": "y"}], ["bad"])
    assert [p.index for p in observed.pods] == [0, 2, 10]
    assert observed.service_exists and observed.config_data == {"hostfile": "x"}
    assert observed.service_ports == service.ports and observed.service_selects_pods
    assert observed.rejections == ("bad",)
    empty = ObservedChildren.from_cache([], [], [])
    assert (empty.pods, empty.service_exists, empty.config_data) == ((), False, None)


# --- merge_conditions --------------------------------------------------------------------------------------------


def cond(type_: str, status: bool, reason: str = "R", message: str = "m") -> DesiredCondition:
    return DesiredCondition(type_, status, reason, message)


def test_new_conditions_get_now_and_generation() -> None:
    merged = merge_conditions([], [cond("Running", True, "AllRunning", "4/4 running")], T0, 3)
    assert merged == [
        {
            "type": "Running",
            "status": "True",
            "reason": "AllRunning",
            "message": "4/4 running",
            "lastTransitionTime": T0,
            "observedGeneration": 3,
        }
    ]


@pytest.mark.parametrize(
    ("before", "after", "moves"), [(True, True, False), (False, False, False), (True, False, True), (False, True, True)]
)
def test_last_transition_time_moves_only_when_status_flips(before: bool, after: bool, moves: bool) -> None:
    previous = merge_conditions([], [cond("Running", before)], T0, 1)
    merged = merge_conditions(previous, [cond("Running", after, "New", "new message")], T2, 2)
    [running] = merged
    assert running["lastTransitionTime"] == (T2 if moves else T0)
    assert (running["status"], running["reason"], running["message"]) == (str(after), "New", "new message")
    assert running["observedGeneration"] == 2


def test_conditions_not_desired_are_kept_unchanged() -> None:
    previous = merge_conditions([], [cond("Running", True), cond("Restarting", False)], T0, 1)
    previous.append({"type": "Custom", "status": "True", "reason": "X", "message": "", "lastTransitionTime": T0})
    merged = merge_conditions(previous, [cond("Running", False)], T1, 5)
    by_type = {c["type"]: c for c in merged}
    assert by_type["Restarting"] == previous[1]
    assert by_type["Custom"] == previous[2]
    assert by_type["Running"]["observedGeneration"] == 5


def test_order_is_stable_whatever_the_input_order() -> None:
    desired = [
        cond("Failed", False),
        cond("Zeta", True),
        cond("Queued", False),
        cond("Running", True),
        cond("Alpha", True),
        cond("Suspended", False),
        cond("Succeeded", True),
        cond("Restarting", False),
        cond("Blocked", False),
        cond("GangScheduled", True),
    ]
    forward = merge_conditions([], desired, T0, 1)
    backward = merge_conditions([], list(reversed(desired)), T0, 1)
    assert forward == backward
    assert [c["type"] for c in forward] == [*CONDITION_ORDER, "Alpha", "Zeta"]


def test_merge_does_not_mutate_previous() -> None:
    previous = merge_conditions([], [cond("Running", True)], T0, 1)
    snapshot = [dict(c) for c in previous]
    merge_conditions(previous, [cond("Running", False)], T1, 2)
    assert previous == snapshot


def test_merged_conditions_carry_the_desired_statuses() -> None:
    merged = merge_conditions([], [cond("Running", True), cond("Failed", False)], T0, 1)
    assert {c["type"]: c["status"] for c in merged} == {"Running": "True", "Failed": "False"}
