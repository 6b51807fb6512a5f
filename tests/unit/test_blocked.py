"""What keeps workers from running is said at once, in status.message, workerStatuses, the Blocked condition and
one Warning Event; admission denials release the gang and retry with backoff; pods stuck Terminating on a lost
node are reported, then force-deleted.

Each scenario is one planner call (or two, the second from the first's status), no server.
"""

from __future__ import annotations

import datetime

from tests.unit.test_planner import CONFIG, NOW, NOW_TEXT, children, kinds, make_job, pod, stored
from trainingjob.api.status import JobStatus
from trainingjob.api.times import format_time
from trainingjob.config import OperatorConfig
from trainingjob.planning.actions import CreateChild, DeleteChild
from trainingjob.reconcile.blockers import nodes_in_question
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.surroundings import AdmissionDenial, ClaimView, NodeView, Refusal

PENDING = {"phase": "Pending", "attemptStartTime": NOW_TEXT}
STARTED = {"phase": "Restarting", "startTime": "2026-11-22T11:00:00Z", "attempt": 1}


def ago(seconds: float) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


def condition(status: JobStatus, kind: str = "Blocked") -> dict | None:
    return next((c for c in status.conditions or () if c["type"] == kind), None)


def waiting(job, index: int, reason: str, message: str):
    return pod(job, index, "Pending", waiting_reason=reason, waiting_message=message, node_name="n1")


def test_a_worker_that_cannot_pull_its_image_is_reported_everywhere_at_once() -> None:
    job = make_job(PENDING)
    result = plan(
        job, children(job, pod(job, 0), waiting(job, 1, "ErrImagePull", "not found: train:typo")), NOW, CONFIG
    )
    blocked = condition(result.status)
    assert (blocked["status"], blocked["reason"]) == ("True", "ImagePullBackOff")
    assert blocked["message"] == "worker 1 (pod job-worker-1) cannot start: ErrImagePull: not found: train:typo"
    assert stored(result)["message"] == f"1/2 workers running; {blocked['message']}"
    worker = stored(result)["workerStatuses"][1]
    assert (worker["reason"], worker["message"]) == ("ErrImagePull", "not found: train:typo")
    assert [(e.type, e.reason, e.message) for e in result.events] == [
        ("Warning", "ImagePullBackOff", blocked["message"])
    ]


def test_the_kubelets_alternating_pull_reasons_make_no_new_condition_or_event() -> None:
    job = make_job(PENDING)
    first = plan(job, children(job, pod(job, 0), waiting(job, 1, "ErrImagePull", "not found")), NOW, CONFIG)
    backoff = waiting(job, 1, "ImagePullBackOff", 'Back-off pulling image "train:typo"')
    again = plan(make_job(first.status), children(job, pod(job, 0), backoff), NOW, CONFIG)
    assert again.events == []
    assert condition(again.status) == condition(first.status)


def test_running_workers_clear_the_condition_quietly() -> None:
    job = make_job(PENDING)
    first = plan(job, children(job, pod(job, 0), waiting(job, 1, "ImagePullBackOff", "x")), NOW, CONFIG)
    later = plan(make_job(first.status), children(job, pod(job, 0), pod(job, 1)), NOW, CONFIG)
    assert condition(later.status)["status"] == "False"
    assert [e.reason for e in later.events] == ["TrainingStarted"]


def test_a_root_image_under_run_as_non_root_gets_a_hint() -> None:
    job = make_job(PENDING)
    message = "container has runAsNonRoot and image will run as root (pod: job-worker-0, container: trainer)"
    result = plan(job, children(job, waiting(job, 0, "CreateContainerConfigError", message), pod(job, 1)), NOW, CONFIG)
    blocked = condition(result.status)
    assert blocked["reason"] == "CreateContainerConfigError"
    assert "set spec.securityContext.runAsUser" in blocked["message"]


def test_an_unschedulable_worker_is_a_blocker_too() -> None:
    job = make_job(PENDING)
    stuck = pod(job, 1, "Pending", unschedulable_message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    result = plan(job, children(job, pod(job, 0), stuck), NOW, CONFIG)
    assert condition(result.status)["reason"] == "Unschedulable"
    assert stored(result)["workerStatuses"][1]["reason"] == "Unschedulable"
    assert "(and" not in stored(result)["message"]


def test_more_blocked_workers_are_counted_in_the_message() -> None:
    job = make_job(PENDING, workers=3)
    pods = [waiting(job, i, "InvalidImageName", "bad") for i in range(3)]
    result = plan(job, children(job, *pods), NOW, CONFIG)
    assert stored(result)["message"].endswith("(and 2 more blocked)")


def test_an_admission_denial_releases_the_gang_until_the_retry() -> None:
    job = make_job(PENDING, workers=3)
    quota = "exceeded quota: gpus, requested: 1, used: 2, limited: 2"
    denial = AdmissionDenial((Refusal("Pod", "job-worker-2", quota),), 2, ago(5))
    observed = children(job, pod(job, 0), pod(job, 1, "Pending"), admission=denial)
    result = plan(job, observed, NOW, CONFIG)
    deleted = kinds(result.actions, DeleteChild)
    assert {d.name for d in deleted} == {"job-worker-0", "job-worker-1"} and not any(d.force for d in deleted)
    assert kinds(result.actions, CreateChild) == []
    assert stored(result)["replacedPods"] == ["pod-uid-0-0", "pod-uid-1-0"]
    assert stored(result)["nextRestartTime"] == format_time(NOW + datetime.timedelta(seconds=20 - 5))
    assert stored(result)["workerStatuses"] == [
        {"workerId": 2, "podName": "job-worker-2", "phase": "NotCreated", "reason": "AdmissionDenied", "message": quota}
    ]
    assert stored(result)["phase"] == "Pending" and stored(result)["workers"] == 0
    blocked = condition(result.status)
    assert blocked["reason"] == "AdmissionDenied" and "exceeded quota" in blocked["message"]
    assert [e.reason for e in result.events] == ["AdmissionDenied"]
    assert result.requeue_after == 15


def test_after_the_backoff_the_workers_are_created_again() -> None:
    job = make_job(PENDING, workers=2)
    denial = AdmissionDenial((Refusal("Pod", "job-worker-1", "exceeded quota"),), 1, ago(11))
    result = plan(job, children(job, admission=denial), NOW, CONFIG)
    assert [a.name for a in kinds(result.actions, CreateChild)] == ["job-worker-0", "job-worker-1"]
    assert kinds(result.actions, DeleteChild) == []


def test_a_running_gang_is_not_released_for_one_refused_replacement() -> None:
    job = make_job({"phase": "Running", "startTime": NOW_TEXT}, workers=2, failurePolicy={"restartStrategy": "Worker"})
    denial = AdmissionDenial((Refusal("Pod", "job-worker-1", "exceeded quota"),), 1, ago(1))
    all_running = plan(job, children(job, pod(job, 0), pod(job, 1), admission=denial), NOW, CONFIG)
    assert kinds(all_running.actions, DeleteChild) == []


def stuck(job, seconds_past_grace: float, node: str = "lost-node"):
    return pod(job, 1, "Running", deleting=True, deletion_timestamp=ago(seconds_past_grace), node_name=node)


def test_a_pod_stuck_terminating_on_a_not_ready_node_is_reported_then_forced() -> None:
    job = make_job(STARTED)
    lost = {"lost-node": NodeView("lost-node", "False", "KubeletNotReady", format_time(ago(600)))}
    early = plan(job, children(job, pod(job, 0), stuck(job, 30), nodes=lost), NOW, CONFIG)
    assert condition(early.status) is None and early.requeue_after == 30
    reported = plan(job, children(job, pod(job, 0), stuck(job, 90), nodes=lost), NOW, CONFIG)
    blocked = condition(reported.status)
    assert blocked["reason"] == "PodStuckTerminating" and "node lost-node is NotReady" in blocked["message"]
    assert not any(d.force for d in kinds(reported.actions, DeleteChild))
    forced = plan(job, children(job, pod(job, 0), stuck(job, 301), nodes=lost), NOW, CONFIG)
    [delete] = [d for d in kinds(forced.actions, DeleteChild) if d.force]
    assert (delete.name, delete.uid) == ("job-worker-1", "pod-uid-1-0")
    assert "PodForceDeleted" in [e.reason for e in forced.events]


def test_a_pod_on_a_ready_node_or_with_forcing_off_is_never_forced() -> None:
    job = make_job(STARTED)
    ready = {"lost-node": NodeView("lost-node", "True")}
    result = plan(job, children(job, pod(job, 0), stuck(job, 3600), nodes=ready), NOW, CONFIG)
    assert not any(d.force for d in kinds(result.actions, DeleteChild))
    assert "waiting for its kubelet" in condition(result.status)["message"]
    lost = {"lost-node": NodeView("lost-node", "Missing")}
    never = OperatorConfig(force_delete_after_seconds=None)
    result = plan(job, children(job, pod(job, 0), stuck(job, 3600), nodes=lost), NOW, never)
    assert not any(d.force for d in kinds(result.actions, DeleteChild))
    assert "force deletion is off" in condition(result.status)["message"]


def test_a_pending_checkpoint_pvc_is_explained_after_a_while() -> None:
    storage = {"enabled": True, "storage": {"size": "1Gi", "storageClassName": "ebs"}}
    job = make_job(PENDING, checkpoint=storage)
    claim = {"job-checkpoints": ClaimView("job-checkpoints", "Pending", ago(10))}
    young = plan(job, children(job, pod(job, 0, "Pending"), pod(job, 1, "Pending"), claims=claim), NOW, CONFIG)
    assert condition(young.status) is None and young.requeue_after == 50
    claim = {"job-checkpoints": ClaimView("job-checkpoints", "Pending", ago(61))}
    old = plan(job, children(job, pod(job, 0, "Pending"), pod(job, 1, "Pending"), claims=claim), NOW, CONFIG)
    blocked = condition(old.status)
    assert blocked["reason"] == "CheckpointVolumePending"
    assert "ReadWriteMany from StorageClass ebs" in blocked["message"]


def test_the_namespaces_pod_security_decides_run_as_non_root() -> None:
    job = make_job(PENDING)
    for restricted in (True, False):
        result = plan(job, children(job, namespace_restricted=restricted), NOW, CONFIG)
        pods = [a.manifest for a in kinds(result.actions, CreateChild) if a.kind == "Pod"]
        assert {p["spec"]["securityContext"].get("runAsNonRoot") for p in pods} == {True if restricted else None}


def test_a_finished_job_is_no_longer_blocked() -> None:
    job = make_job(PENDING, restartPolicy="Never")
    first = plan(job, children(job, pod(job, 0), waiting(job, 1, "ImagePullBackOff", "x")), NOW, CONFIG)
    failed = pod(job, 0, "Failed", exit_code=1)
    result = plan(make_job(first.status, restartPolicy="Never"), children(job, failed), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed" and condition(result.status)["status"] == "False"


def test_news_about_a_stuck_pod_replaces_the_message() -> None:
    job = make_job(STARTED)
    ready = {"lost-node": NodeView("lost-node", "True")}
    first = plan(job, children(job, pod(job, 0), stuck(job, 90), nodes=ready), NOW, CONFIG)
    lost = {"lost-node": NodeView("lost-node", "Unknown", "NodeStatusUnknown", format_time(ago(30)))}
    later = plan(make_job(first.status), children(job, pod(job, 0), stuck(job, 90), nodes=lost), NOW, CONFIG)
    assert "unreachable" in condition(later.status)["message"]
    assert [e.reason for e in later.events] == ["PodStuckTerminating"]


def test_a_worker_running_on_a_lost_node_says_what_the_job_waits_for() -> None:
    job = make_job({"phase": "Running", "startTime": NOW_TEXT})
    unreachable = {"n1": NodeView("n1", "Unknown", "NodeStatusUnknown", format_time(ago(30)))}
    cut_off = pod(job, 1, "Running", not_ready=True, node_name="n1")
    result = plan(job, children(job, pod(job, 0), cut_off, nodes=unreachable), NOW, CONFIG)
    blocked = condition(result.status)
    assert blocked["reason"] == "NodeNotReady" and blocked["message"].startswith("worker 1 (pod job-worker-1)")
    assert "node n1 is unreachable (Ready Unknown, NodeStatusUnknown) since" in blocked["message"]
    assert "tolerationSeconds" in blocked["message"] and "failurePolicy" in blocked["message"]
    assert [e.reason for e in result.events] == ["NodeNotReady"]
    # Nothing is deleted for it: evicting is Kubernetes' call (the job's tolerations), restarting then the job's.
    assert kinds(result.actions, DeleteChild) == []


def test_a_worker_not_ready_on_a_ready_node_is_a_probe_not_a_lost_node() -> None:
    job = make_job({"phase": "Running", "startTime": NOW_TEXT})
    ready = {"n1": NodeView("n1", "True")}
    probing = pod(job, 1, "Running", not_ready=True, node_name="n1")
    result = plan(job, children(job, pod(job, 0), probing, nodes=ready), NOW, CONFIG)
    assert condition(result.status) is None


def test_the_nodes_looked_up_are_those_of_stuck_and_not_ready_pods_only() -> None:
    job = make_job(STARTED)
    pods = (
        pod(job, 0, "Running", node_name="healthy"),
        pod(job, 1, "Running", not_ready=True, node_name="quiet"),
        stuck(job, 90, node="gone"),
    )
    assert nodes_in_question(children(job, *pods), NOW, CONFIG.stuck_after_seconds) == ["gone", "quiet"]
