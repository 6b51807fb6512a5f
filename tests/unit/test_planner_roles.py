"""The planner with roles and elastic PyTorch: each scenario is one call to plan(), no server.

Proves: role pods are created in role order under their own names; the chief (or launcher, or elastic worker 0)
judges success and the pods still running are then deleted; the evaluator is optional and its failures never fail
or gang-restart the training; a role's own restartPolicy applies to it; an elastic job scales up and down without
a restart, replaces a lost worker alone but restarts everyone when worker 0 (the rendezvous host) goes; status has
the role of every non-worker pod and a count per role.
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.unit.test_planner import stored
from trainingjob.api import constants as k
from trainingjob.api.names import pod_name
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import spec_hash
from trainingjob.builders.configmap import desired_config_data
from trainingjob.config import OperatorConfig
from trainingjob.planning.actions import CreateChild, DeleteChild
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.planner import plan

NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, tzinfo=datetime.UTC)
STARTED = {"startTime": "2026-11-22T11:00:00Z"}
CONFIG = OperatorConfig()
PS_ROLES = {"chief": {}, "ps": {"replicas": 2}, "evaluator": {}}


def make_job(status: dict[str, Any] | None = None, generation: int = 2, **spec: Any) -> TrainingJob:
    body = {
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": "uid-1",
            "generation": generation,
            "finalizers": [k.FINALIZER],
        },
        "spec": {"framework": "tensorflow", "image": "img", "command": ["train"], "workers": 2, **spec},
        "status": status or {},
    }
    return TrainingJob.from_body(body)


def ps_job(status: dict[str, Any] | None = None, **spec: Any) -> TrainingJob:
    return make_job(status, **{"roles": PS_ROLES, **spec})


def pod(job: TrainingJob, role: str, index: int, phase: str = "Running", **fields: Any) -> PodView:
    return PodView(
        name=pod_name("job", role, index),
        index=index,
        attempt=0,
        spec_hash=fields.pop("fingerprint", spec_hash(job)),
        phase=phase,
        uid=f"uid-{role}-{index}",
        role=role,
        **fields,
    )


def gang(job: TrainingJob, **phases: str) -> list[PodView]:
    """Every desired pod Running, except those named in `phases` (e.g. ps_1="Failed")."""
    from trainingjob.api.replicas import desired_replicas

    return [pod(job, r.role, r.index, phases.get(f"{r.role}_{r.index}", "Running")) for r in desired_replicas(job.spec)]


def observe(job: TrainingJob, pods: list[PodView]) -> ObservedChildren:
    return ObservedChildren(pods=tuple(pods), service_exists=True, config_data=desired_config_data(job))


def created(result: Any) -> list[str]:
    return [a.name for a in result.actions if isinstance(a, CreateChild)]


def deleted(result: Any) -> list[str]:
    return [a.name for a in result.actions if isinstance(a, DeleteChild)]


def test_a_parameter_server_job_creates_every_role_in_order() -> None:
    job = ps_job()
    result = plan(job, ObservedChildren(), NOW, CONFIG)
    assert created(result) == [
        "job-workers",
        "job-config",
        "job-chief-0",
        "job-ps-0",
        "job-ps-1",
        "job-worker-0",
        "job-worker-1",
        "job-evaluator-0",
    ]
    assert stored(result)["selector"] == "ml.example.com/job-name=job,ml.example.com/role=worker"


def test_the_evaluator_is_not_needed_to_run_and_statuses_are_per_role() -> None:
    job = ps_job({"phase": "Pending"})
    result = plan(job, observe(job, gang(job, evaluator_0="Pending")), NOW, CONFIG)
    assert stored(result)["phase"] == "Running"
    assert stored(result)["message"] == "5/5 pods running (1 chief, 2 ps, 2 workers, 1 evaluator)"
    assert [(w.get("role", "worker"), w["workerId"]) for w in stored(result)["workerStatuses"]] == [
        ("chief", 0),
        ("ps", 0),
        ("ps", 1),
        ("worker", 0),
        ("worker", 1),
        ("evaluator", 0),
    ]
    assert stored(result)["roleStatuses"]["evaluator"] == {
        "replicas": 1,
        "pending": 1,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
    }
    assert stored(result)["workers"] == 2


def test_the_chief_judges_success_and_the_pods_still_running_are_deleted() -> None:
    job = ps_job({"phase": "Running", **STARTED}, cleanPodPolicy="None")
    result = plan(job, observe(job, gang(job, chief_0="Succeeded", worker_1="Succeeded")), NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    assert [c["reason"] for c in stored(result)["conditions"] if c["type"] == "Succeeded"] == ["ChiefSucceeded"]
    assert deleted(result) == ["job-ps-0", "job-ps-1", "job-worker-0", "job-evaluator-0"]


def test_workers_finishing_do_not_finish_a_job_with_a_chief() -> None:
    job = ps_job({"phase": "Running", **STARTED})
    result = plan(job, observe(job, gang(job, worker_0="Succeeded", worker_1="Succeeded")), NOW, CONFIG)
    assert stored(result)["phase"] == "Running" and deleted(result) == []


def test_an_evaluator_failure_restarts_the_evaluator_alone() -> None:
    job = ps_job({"phase": "Running", **STARTED})
    result = plan(job, observe(job, gang(job, evaluator_0="Failed")), NOW, CONFIG)
    assert deleted(result) == ["job-evaluator-0"]
    assert stored(result)["restartCount"] == 1
    assert stored(result)["lastFailure"]["role"] == "evaluator"
    assert "evaluator 0 (pod job-evaluator-0) failed" in stored(result)["message"]


def test_an_evaluator_the_policy_does_not_restart_is_left_failed_while_training_goes_on() -> None:
    never = ps_job({"phase": "Running", **STARTED}, roles={**PS_ROLES, "evaluator": {"restartPolicy": "Never"}})
    exhausted = ps_job({"phase": "Running", "restartCount": 3, **STARTED})
    for job in (never, exhausted):
        result = plan(job, observe(job, gang(job, evaluator_0="Failed")), NOW, CONFIG)
        assert (stored(result)["phase"], deleted(result), created(result)) == ("Running", [], [])


def test_a_parameter_server_failure_restarts_the_gang_and_its_own_policy_can_fail_the_job() -> None:
    job = ps_job({"phase": "Running", **STARTED})
    result = plan(job, observe(job, gang(job, ps_1="Failed")), NOW, CONFIG)
    assert len(deleted(result)) == 6 and stored(result)["phase"] == "Restarting"
    strict = ps_job(
        {"phase": "Running", **STARTED}, roles={**PS_ROLES, "ps": {"replicas": 2, "restartPolicy": "Never"}}
    )
    result = plan(strict, observe(strict, gang(strict, ps_1="Failed")), NOW, CONFIG)
    assert stored(result)["phase"] == "Failed"
    assert stored(result)["message"].startswith("ps 1 (pod job-ps-1) failed")


MPI = {"framework": "mpi", "command": ["mpirun", "t"], "roles": {"launcher": {}}}


def test_an_mpi_job_creates_its_key_with_its_pods_and_the_launcher_judges_it() -> None:
    job = make_job(**MPI)
    result = plan(job, observe(job, []), NOW, CONFIG)
    assert created(result) == ["job-mpi-key", "job-launcher-0", "job-worker-0", "job-worker-1"]
    job = make_job({"phase": "Running", **STARTED}, **MPI)
    result = plan(job, observe(job, gang(job, launcher_0="Succeeded")), NOW, CONFIG)
    assert [c["reason"] for c in stored(result)["conditions"] if c["type"] == "Succeeded"] == ["LauncherSucceeded"]
    assert deleted(result) == ["job-worker-0", "job-worker-1"]


ELASTIC = {"framework": "pytorch", "elastic": {"minWorkers": 2, "maxWorkers": 4}}


def elastic_job(workers: int, generation: int = 2, **status: Any) -> TrainingJob:
    """A running elastic job whose pods were built for generation 2 of its spec."""
    built = make_job(workers=2, **ELASTIC)
    worker_spec = {"generation": 2, "podSpecHash": spec_hash(built), "specHash": spec_hash(built)}
    base = {"phase": "Running", "attempt": 0, "workerSpec": worker_spec, **STARTED}
    return make_job({**base, **status}, generation=generation, workers=workers, **ELASTIC)


def workers(job: TrainingJob, count: int, **phases: str) -> list[PodView]:
    return [pod(job, "worker", i, phases.get(f"worker_{i}", "Running")) for i in range(count)]


def test_scaling_an_elastic_job_up_adds_workers_without_a_restart() -> None:
    job = elastic_job(workers=3, generation=3)
    result = plan(job, observe(job, workers(job, 2)), NOW, CONFIG)
    assert (created(result), deleted(result)) == (["job-worker-2"], [])
    assert stored(result)["phase"] == "Running" and stored(result).get("restartCount", 0) == 0
    assert stored(result)["message"] == "2/3 workers running (elastic: 2 to 4)"


def test_scaling_an_elastic_job_down_removes_the_highest_workers_without_a_restart() -> None:
    job = elastic_job(workers=2, generation=3)
    result = plan(job, observe(job, workers(job, 3)), NOW, CONFIG)
    assert (created(result), deleted(result)) == ([], ["job-worker-2"])
    assert stored(result)["phase"] == "Running" and stored(result)["attempt"] == 0


def test_a_lost_elastic_worker_is_replaced_alone() -> None:
    job = elastic_job(workers=3)
    pods = workers(job, 3)
    pods[1] = pod(job, "worker", 1, "Failed", disrupted=True, reason="Evicted")
    result = plan(job, observe(job, pods), NOW, CONFIG)
    assert deleted(result) == ["job-worker-1"] and stored(result)["disruptionCount"] == 1
    failed = elastic_job(workers=3)
    result = plan(failed, observe(failed, workers(failed, 3, worker_2="Failed")), NOW, CONFIG)
    assert deleted(result) == ["job-worker-2"] and stored(result)["restartCount"] == 1


def test_losing_elastic_worker_0_restarts_every_worker() -> None:
    job = elastic_job(workers=3)
    result = plan(job, observe(job, workers(job, 3, worker_0="Failed")), NOW, CONFIG)
    assert deleted(result) == ["job-worker-0", "job-worker-1", "job-worker-2"]


def test_an_elastic_job_runs_with_its_minimum_and_succeeds_with_worker_0() -> None:
    job = elastic_job(workers=4)
    result = plan(job, observe(job, workers(job, 4, worker_3="Pending")), NOW, CONFIG)
    assert stored(result)["phase"] == "Running"
    assert stored(result)["roleStatuses"]["worker"] == {
        "replicas": 4,
        "pending": 1,
        "running": 3,
        "succeeded": 0,
        "failed": 0,
    }
    result = plan(job, observe(job, workers(job, 4, worker_0="Succeeded", worker_3="Pending")), NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    assert deleted(result) == ["job-worker-1", "job-worker-2", "job-worker-3"]
