"""Gang scheduling with Kubernetes' own Workload API and the real kube-scheduler (GangScheduling plugin, alpha in
1.35; `tj cluster up` enables it): two 4-worker GPU jobs on 6 free GPUs do not deadlock, gangs follow scaling and
restarts, and a provider the cluster does not serve is explained.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gang_support import (
    REACT,
    bound,
    condition,
    finish,
    gang_status,
    gpu_pool,
    min_count,
    pool_job,
    wait_gang,
    workloads,
)
from tests.integration.test_blocked_workers import blocked, wait_blocked, warnings
from tests.jobs import SIM, create_job, event_reasons, get_job, job_pods, live_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


@pytest.fixture
def six_gpus(kube: Kube, namespace: str) -> Iterator[list[str]]:
    yield from gpu_pool(kube, namespace, nodes=2, gpus=3)


def test_two_gangs_on_six_gpus_one_runs_the_other_binds_nothing_until_it_finishes(
    kube: Kube, namespace: str, six_gpus: list[str]
) -> None:
    for name in ("first", "second"):
        create_job(kube, namespace, pool_job(name, namespace))
    running = wait_until(
        lambda: next(
            (n for n in ("first", "second") if gang_status(kube, namespace, n).get("state") == "Scheduled"), None
        ),
        REACT,
        "one gang to be scheduled",
    )
    waiting = "second" if running == "first" else "first"
    wait_phase(kube, namespace, running, "Running", timeout=REACT)
    # Each gang is a Workload owned by its job, created before its workers, which all refer to it.
    gangs = workloads(kube, namespace)
    for name in ("first", "second"):
        workload = gangs[f"{name}-gang-0"]
        assert min_count(workload) == 4
        [owner] = workload["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == (k.KIND, name, True)
    wait_until(lambda: len(job_pods(kube, namespace, waiting)) == 4, REACT, f"{waiting}'s 4 workers to exist")
    for pod in job_pods(kube, namespace, waiting):
        assert pod.spec.workload_ref.name == f"{waiting}-gang-0" and pod.spec.workload_ref.pod_group == "workers"
        assert pod.metadata.labels[k.LABEL_GANG] == f"{waiting}-gang-0"
    gang = wait_gang(kube, namespace, waiting, "Waiting")
    assert gang["placed"] == 0 and gang["kind"] == "Workload" and gang["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    assert condition(kube, namespace, waiting, "GangScheduled")["status"] == "False"
    # Not one worker of the waiting gang is bound while the first runs (without gangs: 3 + 3, a deadlock).
    for _ in range(10):
        assert not bound(job_pods(kube, namespace, waiting))
        assert len(bound(job_pods(kube, namespace, running))) == 4
    finish(kube, namespace, running)
    wait_phase(kube, namespace, running, "Succeeded", timeout=REACT)
    wait_phase(kube, namespace, waiting, "Running", timeout=REACT)
    assert len(bound(job_pods(kube, namespace, waiting))) == 4
    assert condition(kube, namespace, waiting, "GangScheduled")["status"] == "True"
    assert "GangScheduled" in event_reasons(kube, namespace, waiting)
    assert "GangCreated" in event_reasons(kube, namespace, waiting)
    # A finished job's gang object goes (its workers need it no more).
    wait_until(lambda: f"{running}-gang-0" not in workloads(kube, namespace), REACT, "the finished gang to go")


def test_scaling_forms_a_new_gang_of_the_new_size(kube: Kube, namespace: str, six_gpus: list[str]) -> None:
    create_job(kube, namespace, pool_job("scaled", namespace, workers=2))
    wait_phase(kube, namespace, "scaled", "Running", timeout=REACT)
    assert min_count(workloads(kube, namespace)["scaled-gang-0"]) == 2
    patch_job(kube, namespace, "scaled", {"spec": {"workers": 5}})
    wait_until(lambda: "scaled-gang-1" in workloads(kube, namespace), REACT, "the gang of attempt 1")
    wait_phase(kube, namespace, "scaled", "Running", timeout=REACT)
    assert min_count(workloads(kube, namespace)["scaled-gang-1"]) == 5
    pods = live_pods(kube, namespace, "scaled")
    assert len(pods) == 5 and {p.spec.workload_ref.name for p in pods} == {"scaled-gang-1"}
    wait_until(lambda: "scaled-gang-0" not in workloads(kube, namespace), REACT, "the old gang to go")
    # Scaled beyond the pool: the whole new gang waits, none of it bound (no partial gang holds GPUs).
    patch_job(kube, namespace, "scaled", {"spec": {"workers": 7}})
    wait_until(lambda: "scaled-gang-2" in workloads(kube, namespace), REACT, "the gang of attempt 2")
    wait_until(lambda: len(live_pods(kube, namespace, "scaled")) == 7, REACT, "7 workers to exist")
    gang = wait_gang(kube, namespace, "scaled", "Waiting")
    assert gang["minCount"] == 7 and not bound(live_pods(kube, namespace, "scaled"))
    wait_until(lambda: blocked(get_job(kube, namespace, "scaled")), REACT, "the job to say why it waits")


@pytest.mark.parametrize("strategy", ["Gang", "Worker"])
def test_a_restart_keeps_the_gang_whole(kube: Kube, namespace: str, six_gpus: list[str], strategy: str) -> None:
    policy = {"restartStrategy": strategy, "backoff": {"baseSeconds": 1, "maxSeconds": 2}}
    create_job(kube, namespace, pool_job("restarts", namespace, workers=3, failurePolicy=policy))
    wait_phase(kube, namespace, "restarts", "Running", timeout=REACT)
    failing = job_pods(kube, namespace, "restarts")[1]
    fail = {f"{SIM}/fail": "true", f"{SIM}/exit-code": "1"}
    kube.core.patch_namespaced_pod(failing.metadata.name, namespace, {"metadata": {"annotations": fail}})
    wait_until(lambda: job_status(kube, namespace, "restarts").get("restartCount") == 1, REACT, "the restart")
    wait_phase(kube, namespace, "restarts", "Running", timeout=REACT)
    pods = live_pods(kube, namespace, "restarts")
    # Gang: a new attempt forms a new gang; Worker: the replacement joins its bound survivors' gang.
    expected = "restarts-gang-1" if strategy == "Gang" else "restarts-gang-0"
    assert len(pods) == 3 and {p.spec.workload_ref.name for p in pods} == {expected}
    assert len(bound(pods)) == 3
    wait_until(lambda: set(workloads(kube, namespace)) == {expected}, REACT, f"only {expected} to remain")


def job_status(kube: Kube, namespace: str, name: str) -> dict:
    return (get_job(kube, namespace, name) or {}).get("status") or {}


def test_a_provider_the_cluster_does_not_serve_is_explained(kube: Kube, namespace: str, six_gpus: list[str]) -> None:
    manifest = pool_job("volcano", namespace, workers=2, scheduling={"gang": {"provider": "Volcano"}})
    create_job(kube, namespace, manifest)
    job = wait_blocked(kube, namespace, "volcano", "GangSchedulingUnavailable")
    assert "scheduling.volcano.sh/v1beta1" in blocked(job)["message"]
    assert job["status"]["phase"] == "Pending" and job["status"]["gang"]["state"] == "Waiting"
    assert not job_pods(kube, namespace, "volcano")
    wait_until(lambda: "GangSchedulingUnavailable" in warnings(kube, namespace, "volcano"), REACT, "a Warning Event")
    patch_job(kube, namespace, "volcano", {"spec": {"scheduling": {"gang": {"provider": "Auto"}}}})
    wait_phase(kube, namespace, "volcano", "Running", timeout=REACT)
