"""The planner decides everything from (job, observed children, now): each scenario is one call, no server."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainingjob.api import constants as k
from trainingjob.api.status import JobStatus
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import spec_hash
from trainingjob.builders.configmap import desired_config_data
from trainingjob.config import OperatorConfig
from trainingjob.planning.actions import AddFinalizer, CreateChild, DeleteChild, RemoveFinalizer, ReplaceChild
from trainingjob.reconcile.inputs import PlanInputs
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.plan import JobPlan
from trainingjob.reconcile.planner import plan

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
NOW_TEXT = "2026-11-22T12:00:00Z"
CONFIG = OperatorConfig()


def make_job(
    status: dict[str, Any] | JobStatus | None = None, finalizers=(k.FINALIZER,), deleting: bool = False, **spec: Any
) -> TrainingJob:
    """A job with `status` as stored (a planned JobStatus is stored as it would be written)."""
    if isinstance(status, JobStatus):
        status = status.to_dict()
    body = {
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": "uid-1",
            "generation": 2,
            "finalizers": list(finalizers),
            **({"deletionTimestamp": NOW_TEXT} if deleting else {}),
        },
        "spec": {"framework": "pytorch", "image": "img", "command": ["train"], "workers": 2, **spec},
        "status": status or {},
    }
    return TrainingJob.from_body(body)


def stored(result: JobPlan) -> dict[str, Any]:
    """The planned status as it is written."""
    return result.status.to_dict()


def pod(
    job: TrainingJob,
    index: int,
    phase: str = "Running",
    attempt: int = 0,
    fingerprint: str | None = None,
    **fields: Any,
) -> PodView:
    return PodView(
        name=f"job-worker-{index}",
        index=index,
        attempt=attempt,
        spec_hash=fingerprint if fingerprint is not None else spec_hash(job),
        phase=phase,
        uid=f"pod-uid-{index}-{attempt}",
        **fields,
    )


def children(job: TrainingJob, *pods: PodView, **fields: Any) -> ObservedChildren:
    defaults = {"service_exists": True, "config_data": desired_config_data(job)}
    return ObservedChildren(pods=tuple(pods), **{**defaults, **fields})


def kinds(actions: list, action_type: type) -> list:
    return [a for a in actions if isinstance(a, action_type)]


def test_new_job_gets_finalizer_service_config_and_all_workers() -> None:
    job = make_job(finalizers=())
    result = plan(job, ObservedChildren(), NOW, CONFIG)
    assert isinstance(result.actions[0], AddFinalizer)
    created = [(a.kind, a.name) for a in kinds(result.actions, CreateChild)]
    assert created == [
        ("Service", "job-workers"),
        ("ConfigMap", "job-config"),
        ("Pod", "job-worker-0"),
        ("Pod", "job-worker-1"),
    ]
    assert stored(result)["phase"] == "Pending"
    assert stored(result)["selector"] == "ml.example.com/job-name=job"
    assert result.events == []  # WorkersCreated is recorded by the apply layer for pods it really created


def test_pods_created_but_not_yet_cached_are_not_created_again() -> None:
    job = make_job({"phase": "Pending"})
    observed = children(job, pod(job, 0), claimed_pods=frozenset({"job-worker-1"}))
    assert kinds(plan(job, observed, NOW, CONFIG).actions, CreateChild) == []


def test_all_workers_running_starts_training() -> None:
    job = make_job({"phase": "Pending"})
    result = plan(job, children(job, pod(job, 0), pod(job, 1)), NOW, CONFIG)
    assert result.actions == []
    assert stored(result)["phase"] == "Running" and stored(result)["startTime"] == NOW_TEXT
    running = next(c for c in stored(result)["conditions"] if c["type"] == "Running")
    assert (running["status"], running["lastTransitionTime"], running["observedGeneration"]) == ("True", NOW_TEXT, 2)
    assert [e.reason for e in result.events] == ["TrainingStarted"]


def test_steady_state_plans_nothing_and_the_same_status() -> None:
    job = make_job({"phase": "Pending"})
    observed = children(job, pod(job, 0), pod(job, 1))
    first = plan(job, observed, NOW, CONFIG)
    later = NOW + datetime.timedelta(minutes=5)
    again = plan(make_job(first.status), observed, later, CONFIG)
    assert again.actions == [] and again.events == []
    assert again.status == first.status


def test_all_workers_succeeded_completes_the_job() -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"})
    result = plan(job, children(job, pod(job, 0, "Succeeded"), pod(job, 1, "Succeeded")), NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    assert stored(result)["completionTime"] == NOW_TEXT
    assert stored(result)["startTime"] == "2026-11-22T11:00:00Z"
    assert [e.reason for e in result.events] == ["TrainingSucceeded"]


def test_failed_worker_fails_the_job_and_stops_the_others() -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}, restartPolicy="Never")
    failed = pod(job, 1, "Failed", exit_code=3, reason="Error")
    result = plan(job, children(job, pod(job, 0), failed), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "WorkerFailed"
    assert condition["message"] == "worker 1 (pod job-worker-1) failed with exit code 3 (Error)"
    assert [(d.name, d.uid) for d in kinds(result.actions, DeleteChild)] == [("job-worker-0", "pod-uid-0-0")]
    worker = stored(result)["workerStatuses"][1]
    assert (worker["exitCode"], worker["reason"]) == (3, "Error")


def test_spec_change_while_running_restarts_the_whole_gang() -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}, workers=4)
    result = plan(job, children(job, pod(job, 0, fingerprint="old"), pod(job, 1, fingerprint="old")), NOW, CONFIG)
    assert stored(result)["phase"] == "Restarting"
    assert (stored(result)["attempt"], stored(result)["disruptionCount"]) == (1, 0)
    assert sorted(d.name for d in kinds(result.actions, DeleteChild)) == ["job-worker-0", "job-worker-1"]
    assert kinds(result.actions, CreateChild) == []
    assert [e.reason for e in result.events] == ["Restarting"]


def test_spec_change_before_start_replaces_pods_without_a_new_attempt() -> None:
    job = make_job({"phase": "Pending"})
    result = plan(job, children(job, pod(job, 0, "Pending", fingerprint="old")), NOW, CONFIG)
    assert [d.name for d in kinds(result.actions, DeleteChild)] == ["job-worker-0"]
    assert [c.name for c in kinds(result.actions, CreateChild)] == ["job-worker-1"]
    assert stored(result)["attempt"] == 0


@pytest.mark.parametrize("disruption", ["deleted", "evicted", "terminating"])
def test_disrupted_worker_of_a_started_job_is_a_gang_restart(disruption: str) -> None:
    recorded = [{"workerId": i, "podName": f"job-worker-{i}", "phase": "Running"} for i in range(2)]
    job = make_job(
        {"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "workerStatuses": recorded, "disruptionCount": 2}
    )
    second = {
        "deleted": [],
        "evicted": [pod(job, 1, "Failed", disrupted=True, reason="Evicted")],
        "terminating": [pod(job, 1, deleting=True)],
    }[disruption]
    result = plan(job, children(job, pod(job, 0), *second), NOW, CONFIG)
    assert stored(result)["phase"] == "Restarting"
    assert (
        stored(result)["attempt"],
        stored(result)["disruptionCount"],
        stored(result)["restartCount"],
    ) == (1, 3, 0)
    assert "job-worker-0" in [d.name for d in kinds(result.actions, DeleteChild)]


def test_after_a_restart_new_pods_wait_for_old_names_to_be_free() -> None:
    job = make_job({"phase": "Restarting", "startTime": "2026-11-22T11:00:00Z", "attempt": 1})
    old = pod(job, 0, attempt=0, deleting=True)
    result = plan(job, children(job, old), NOW, CONFIG)
    created = kinds(result.actions, CreateChild)
    assert [c.name for c in created] == ["job-worker-1"]
    env = {e["name"]: e.get("value") for e in created[0].manifest["spec"]["containers"][0]["env"]}
    assert (env["TRAININGJOB_RESTART_COUNT"], env["RESUME_FROM_CHECKPOINT"]) == ("1", "true")
    assert created[0].manifest["metadata"]["labels"][k.LABEL_ATTEMPT] == "1"
    assert stored(result)["phase"] == "Restarting"


def test_restarted_gang_running_again_resumes() -> None:
    job = make_job({"phase": "Restarting", "startTime": "2026-11-22T11:00:00Z", "attempt": 1})
    result = plan(job, children(job, pod(job, 0, attempt=1), pod(job, 1, attempt=1)), NOW, CONFIG)
    assert stored(result)["phase"] == "Running"
    restarting = next(c for c in stored(result)["conditions"] if c["type"] == "Restarting")
    assert restarting["status"] == "False"
    assert [e.reason for e in result.events] == ["TrainingResumed"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_job_ignores_spec_changes(phase: str) -> None:
    status = {"phase": phase, "completionTime": NOW_TEXT}
    job = make_job(status, workers=8)
    result = plan(job, children(job, pod(job, 0, "Succeeded", fingerprint="old")), NOW, CONFIG)
    assert stored(result) == {**status, "observedGeneration": 2}  # the edit is observed, and nothing else changes
    assert result.actions == [] and result.events == []


def test_a_finished_job_still_takes_the_report_that_was_pending_when_it_finished() -> None:
    """The last report (100 %, the final checkpoint) is the one worth keeping once the job is over: the operator
    holds it (PlanInputs.latest_progress), due or not."""
    from trainingjob.progress.report import Report

    status = {"phase": "Succeeded", "completionTime": NOW_TEXT, "progress": {"epoch": 1, "totalEpochs": 6}}
    job = make_job(status)
    checkpoint = {"path": "/checkpoints/ckpt-6.pt", "epoch": 6}
    report = Report(epoch=6, total_epochs=6, checkpoint=checkpoint, received=NOW_TEXT)
    result = plan(job, children(job), NOW, CONFIG, PlanInputs(latest_progress=report))
    assert result.report is report
    assert (stored(result)["phase"], stored(result)["progress"]["percent"]) == ("Succeeded", 100.0)
    assert stored(result)["lastCheckpoint"] == {**checkpoint, "time": NOW_TEXT}


def test_deleting_job_stops_workers_and_releases_its_finalizer() -> None:
    job = make_job({"phase": "Running"}, deleting=True)
    result = plan(job, children(job, pod(job, 0), pod(job, 1, deleting=True)), NOW, CONFIG)
    assert [d.name for d in kinds(result.actions, DeleteChild)] == ["job-worker-0"]
    assert isinstance(result.actions[-1], RemoveFinalizer)


def test_hyperparameter_env_collision_is_invalid_spec() -> None:
    job = make_job(hyperparameters={"learningRate": 1, "learning_rate": 2})
    result = plan(job, ObservedChildren(), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    condition = next(c for c in stored(result)["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "InvalidSpec" and "HYPERPARAM_LEARNING_RATE" in condition["message"]
    assert kinds(result.actions, CreateChild) == []
    assert [e.reason for e in result.events] == ["InvalidSpec"]


def test_pod_rejected_by_the_api_server_is_invalid_spec() -> None:
    job = make_job({"phase": "Pending"})
    observed = children(job, rejections=("Pod job-worker-0 was rejected: violates PodSecurity",))
    result = plan(job, observed, NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    assert "violates PodSecurity" in stored(result)["message"]


def test_missing_service_and_edited_config_map_are_repaired() -> None:
    job = make_job({"phase": "Pending"}, hyperparameters={"lr": 0.1})
    observed = children(job, pod(job, 0), pod(job, 1), service_exists=False, config_data={"hyperparameters.json": "{}"})
    result = plan(job, observed, NOW, CONFIG)
    assert [(a.kind, a.name) for a in kinds(result.actions, CreateChild)] == [("Service", "job-workers")]
    replaced = kinds(result.actions, ReplaceChild)
    assert [r.name for r in replaced] == ["job-config"]
    assert replaced[0].manifest["data"] == desired_config_data(job)


def test_a_service_whose_port_differs_from_the_spec_is_updated_once_it_matches_nothing_is_done() -> None:
    job = make_job({"phase": "Running", "startTime": "2026-11-22T11:00:00Z"}, networking={"masterPort": 23456})
    old_ports = (("dist", 29500, 29500, "TCP"),)
    result = plan(job, children(job, pod(job, 0), pod(job, 1), service_ports=old_ports), NOW, CONFIG)
    (replace,) = [a for a in kinds(result.actions, ReplaceChild) if a.kind == "Service"]
    assert replace.manifest["spec"]["ports"] == [
        {"name": "dist", "port": 23456, "targetPort": 23456, "protocol": "TCP"}
    ]
    assert "ServiceUpdated" in [e.reason for e in result.events]
    new_ports = (("dist", 23456, 23456, "TCP"),)
    settled = plan(job, children(job, pod(job, 0), pod(job, 1), service_ports=new_ports), NOW, CONFIG)
    assert [a for a in kinds(settled.actions, ReplaceChild) if a.kind == "Service"] == []


def test_service_ports_from_the_api_compare_equal_to_ours() -> None:
    from trainingjob.builders.service import desired_service, service_ports

    job = make_job()
    cached = [{"name": "dist", "port": 29500, "targetPort": 29500, "protocol": "TCP"}]
    assert service_ports(cached) == service_ports(desired_service(job)["spec"]["ports"])
    assert service_ports([{"name": "dist", "port": 29500}]) == service_ports(cached)  # API defaults filled in


def test_unschedulable_workers_are_explained_in_the_status() -> None:
    job = make_job({"phase": "Pending"})
    stuck = pod(job, 1, "Pending", unschedulable_message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    result = plan(job, children(job, pod(job, 0), stuck), NOW, CONFIG)
    assert stored(result)["phase"] == "Pending"
    assert "cannot schedule: 0/4 nodes are available" in stored(result)["message"]


PHASES = st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])


@settings(max_examples=200, deadline=None)
@given(workers=st.integers(1, 6), phases=st.lists(PHASES, max_size=6), started=st.booleans())
def test_planner_never_creates_a_taken_name_and_always_reports_a_known_phase(
    workers: int, phases: list[str], started: bool
) -> None:
    status = {"phase": "Running", "startTime": NOW_TEXT} if started else {"phase": "Pending"}
    job = make_job(status, workers=workers)
    pods = [pod(job, i, phase) for i, phase in enumerate(phases[:workers])]
    result = plan(job, children(job, *pods), NOW, CONFIG)
    created = [c.name for c in kinds(result.actions, CreateChild) if c.kind == "Pod"]
    assert len(created) == len(set(created))
    assert not set(created) & {p.name for p in pods}
    assert stored(result)["phase"] in k.PHASES
    assert len(stored(result)["workerStatuses"]) <= workers


@pytest.mark.parametrize("key", ["1st", "with space", "x" * 64, "ünïcode"])
def test_hyperparameter_key_the_schema_cannot_check_is_invalid_spec(key: str) -> None:
    result = plan(make_job(hyperparameters={key: 1}), ObservedChildren(), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    assert "spec.hyperparameters keys" in stored(result)["message"]


@pytest.mark.parametrize(
    ("observed_generation", "reason"),
    [(1, "ConfigUpdated"), (2, "ConfigRestored")],
)
def test_config_event_says_whether_the_spec_or_an_edit_changed_the_config_map(
    observed_generation: int, reason: str
) -> None:
    from trainingjob.reconcile.planner import config_event

    job = make_job({"phase": "Running", "observedGeneration": observed_generation})
    assert job.generation == 2
    assert config_event(job).reason == reason
