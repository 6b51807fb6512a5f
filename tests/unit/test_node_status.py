"""Pod status as the local node reports it (pure): phase by the kubelet's rules, conditions, container states."""

from __future__ import annotations

import pytest

from trainingjob.node.pods.status import ContainerView, PodFacts, Termination, pod_conditions, pod_phase, pod_status


def running(name: str = "main") -> ContainerView:
    view = ContainerView(name, "img")
    view.set_running("2026-01-01T00:00:00Z", "process://1")
    return view


def ended(code: int, name: str = "main") -> ContainerView:
    view = ContainerView(name, "img")
    view.set_terminated(Termination(code, "Completed" if code == 0 else "Error", "2026-01-01T00:01:00Z"))
    return view


def waiting(reason: str = "ContainerCreating", name: str = "main", last: int | None = None) -> ContainerView:
    view = ContainerView(name, "img")
    view.set_waiting(reason)
    if last is not None:
        view.last_termination = Termination(last, "Error", "2026-01-01T00:01:00Z")
    return view


@pytest.mark.parametrize(
    ("policy", "init", "app", "phase"),
    [
        ("Never", [], [waiting()], "Pending"),
        ("Never", [], [running()], "Running"),
        ("Never", [], [ended(0)], "Succeeded"),
        ("Never", [], [ended(1)], "Failed"),
        ("Never", [], [ended(0), ended(2, "b")], "Failed"),
        ("Never", [], [ended(0), running("b")], "Running"),
        ("OnFailure", [], [ended(1)], "Running"),
        ("OnFailure", [], [ended(0)], "Succeeded"),
        ("OnFailure", [], [waiting("CrashLoopBackOff", last=1)], "Running"),
        ("Always", [], [ended(0)], "Running"),
        ("Never", [running("init")], [waiting("PodInitializing")], "Pending"),
        ("Never", [ended(3, "init")], [waiting("PodInitializing")], "Failed"),
        ("OnFailure", [ended(3, "init")], [waiting("PodInitializing")], "Pending"),
        ("Never", [ended(0, "init")], [running()], "Running"),
    ],
)
def test_phase_follows_the_kubelet(policy: str, init: list, app: list, phase: str) -> None:
    assert pod_phase({"restartPolicy": policy}, init, app) == phase


def test_conditions_of_a_running_pod_and_of_a_completed_one() -> None:
    conditions = {c["type"]: c for c in pod_conditions("Running", True, [ended(0, "init")], [running()])}
    assert all(c["status"] == "True" for c in conditions.values())
    unready = {c["type"]: c for c in pod_conditions("Pending", True, [], [waiting()])}
    assert unready["Ready"]["reason"] == "ContainersNotReady"
    assert unready["Ready"]["message"] == "containers with unready status: [main]"
    done = {c["type"]: c for c in pod_conditions("Succeeded", False, [], [ended(0)])}
    assert done["Initialized"] == {
        "type": "Initialized",
        "status": "True",
        "reason": "PodCompleted",
        "lastProbeTime": None,
    }
    assert done["Ready"]["status"] == "False" and done["Ready"]["reason"] == "PodCompleted"
    assert done["PodReadyToStartContainers"]["status"] == "False"
    failed_init = {c["type"]: c for c in pod_conditions("Failed", False, [ended(1, "prep")], [waiting()])}
    assert failed_init["Initialized"]["status"] == "False" and "[prep]" in failed_init["Initialized"]["message"]


def test_status_keeps_transition_times_and_other_conditions() -> None:
    pod = {
        "spec": {"restartPolicy": "Never"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "T1"},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": "T1"},
            ]
        },
    }
    facts = PodFacts(host_ip="10.1.0.2", pod_ip="10.1.1.3", start_time="T0", sandbox_ready=True)
    status = pod_status(pod, [], [running()], facts, "T2")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["PodScheduled"]["lastTransitionTime"] == "T0"  # not ours: kept as is
    assert conditions["Ready"]["lastTransitionTime"] == "T1"  # unchanged status keeps its time
    assert conditions["ContainersReady"]["lastTransitionTime"] == "T2"  # False -> True now
    assert status["podIPs"] == [{"ip": "10.1.1.3"}] and status["hostIPs"] == [{"ip": "10.1.0.2"}]
    assert status["phase"] == "Running" and "reason" not in status


def test_forced_phase_and_reason() -> None:
    pod = {"spec": {"restartPolicy": "Always"}, "status": {}}
    facts = PodFacts("10.1.0.2", None, None, False, "DeadlineExceeded", "too long", "Failed")
    status = pod_status(pod, [], [ended(137)], facts, "T")
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "DeadlineExceeded", "too long")
    assert "podIP" not in status


def test_container_status_shape() -> None:
    view = running()
    view.image_id = "sha256:abc"
    view.restart_count = 2
    view.last_termination = Termination(3, "Error", "F", started_at="S", message="boom", container_id="process://0")
    entry = view.to_api()
    assert entry["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert entry["lastState"]["terminated"] == {
        "exitCode": 3,
        "reason": "Error",
        "finishedAt": "F",
        "startedAt": "S",
        "message": "boom",
        "containerID": "process://0",
    }
    assert (entry["ready"], entry["started"], entry["restartCount"], entry["containerID"]) == (
        True,
        True,
        2,
        "process://1",
    )
    assert waiting("ErrImagePull").to_api()["state"] == {"waiting": {"reason": "ErrImagePull"}}
