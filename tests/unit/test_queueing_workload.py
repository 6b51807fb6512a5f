"""The Workload a TrainingJob needs, and what Kueue's objects say (queueing/workload.py, queueing/admission.py)."""

from __future__ import annotations

from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.queueing import admission, workload

CONFIG = OperatorConfig()


def job(**spec: Any) -> TrainingJob:
    body = {"framework": "pytorch", "image": "registry.example/train:1", "command": ["python"], "workers": 4, **spec}
    metadata = {"name": "bert", "namespace": "team-a", "uid": "u-1", "generation": 1}
    return TrainingJob.from_body({"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": metadata, "spec": body})


def test_one_pod_set_per_role_with_counts_and_the_workers_requests() -> None:
    tf = job(framework="tensorflow", gpuPerWorker=2, roles={"ps": {"replicas": 2}, "chief": {"replicas": 1}})
    sets = workload.pod_sets(tf, CONFIG)
    assert [(s["name"], s["count"]) for s in sets] == [("chief", 1), ("ps", 2), ("worker", 4)]
    worker = sets[-1]["template"]["spec"]
    assert worker["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "2"}
    assert "resources" not in sets[1]["template"]["spec"]["containers"][0]  # ps: no GPUs, no requests declared


def test_the_template_carries_the_jobs_placement() -> None:
    placed = job(gpuPerWorker=1, scheduling={"nodeSelector": {"pool": "a100"}, "priorityClassName": "high"})
    spec = workload.pod_sets(placed, CONFIG)[0]["template"]["spec"]
    assert spec["nodeSelector"]["pool"] == "a100"
    assert spec["priorityClassName"] == "high"


def test_elastic_workers_may_be_admitted_partially_down_to_min_workers() -> None:
    elastic = job(workers=8, elastic={"minWorkers": 2, "maxWorkers": 8})
    pod_set = workload.pod_sets(elastic, CONFIG)[0]
    assert (pod_set["count"], pod_set["minCount"]) == (8, 2)
    # minWorkers changed while queued: a new Workload
    other = job(workers=8, elastic={"minWorkers": 3, "maxWorkers": 8})
    assert workload.pod_sets_hash(workload.pod_sets(other, CONFIG)) != workload.pod_sets_hash([pod_set])


@pytest.mark.parametrize(
    "spec",
    [
        {},  # a fixed gang needs all of its workers
        {"workers": 2, "elastic": {"minWorkers": 2, "maxWorkers": 4}},  # nothing below spec.workers to admit
        {"framework": "tensorflow", "roles": {"ps": {"replicas": 2}}},  # other roles never (one minCount per Workload)
    ],
)
def test_no_min_count_when_the_job_cannot_run_with_fewer(spec: dict[str, Any]) -> None:
    assert all("minCount" not in pod_set for pod_set in workload.pod_sets(job(**spec), CONFIG))


def test_the_workload_is_owned_by_the_job_and_queued_with_its_priority() -> None:
    manifest = workload.desired_workload(job(), "team-a-queue", "high", {"high": 1000}, CONFIG)
    assert manifest["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    owner = manifest["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("TrainingJob", "bert", "u-1", True)
    spec = manifest["spec"]
    assert spec["queueName"] == "team-a-queue"
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    assert spec["priority"] == 1000
    assert manifest["metadata"]["labels"][workload.LABEL_POD_SETS_HASH] == workload.pod_sets_hash(spec["podSets"])


def test_no_priority_class_means_priority_zero_as_kueues_own_integrations_set_it() -> None:
    spec = workload.desired_workload(job(), "q", None, {}, CONFIG)["spec"]
    assert "priorityClassRef" not in spec and spec["priority"] == 0


def test_names_are_deterministic_per_job_uid_and_bounded() -> None:
    assert workload.workload_name("bert", "u-1") == workload.workload_name("bert", "u-1")
    assert workload.workload_name("bert", "u-1") != workload.workload_name("bert", "u-2")
    assert len(workload.workload_name("x" * 300, "u")) <= 253


def test_a_spec_change_changes_the_pod_sets_hash() -> None:
    before = workload.pod_sets_hash(workload.pod_sets(job(), CONFIG))
    assert before != workload.pod_sets_hash(workload.pod_sets(job(workers=5), CONFIG))
    assert before == workload.pod_sets_hash(workload.pod_sets(job(), CONFIG))


def admitted_body(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "trainingjob-bert-1", "uid": "w-1", "labels": {workload.LABEL_POD_SETS_HASH: "h"}},
        "spec": {"queueName": "q"},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "worker", "flavors": {"nvidia.com/gpu": "a100", "cpu": "x"}, "count": 3}
                ],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""},
            ],
            **status,
        },
    }


def test_an_admitted_workload_is_read_with_its_assignments() -> None:
    view = admission.workload_view(admitted_body())
    assert view.admitted and view.quota_reserved and view.evicted is None
    assert (view.cluster_queue, view.queue, view.pod_sets_hash) == ("cq", "q", "h")
    assert view.assigned_count("worker") == 3


def test_placement_merges_the_admitted_flavors_labels_and_tolerations() -> None:
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    flavors = {
        "a100": admission.flavor_view(
            {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {"pool": "a100"}, "tolerations": [toleration]}}
        ),
        "x": admission.flavor_view({"metadata": {"name": "x"}, "spec": {"nodeLabels": {"zone": "z1"}}}),
    }
    placed = admission.placement(admission.workload_view(admitted_body()), flavors)["worker"]
    assert dict(placed.node_selector) == {"pool": "a100", "zone": "z1"}
    assert placed.tolerations == (toleration,)


@pytest.mark.parametrize("missing", ["a100", "x"])
def test_a_flavor_missing_from_the_cache_adds_nothing(missing: str) -> None:
    flavors = {name: admission.FlavorView(name, {"f": name}) for name in ("a100", "x") if name != missing}
    placed = admission.placement(admission.workload_view(admitted_body()), flavors)["worker"]
    assert missing not in placed.node_selector.values()


def test_what_kueue_writes_is_truncated_before_anyone_shows_it() -> None:
    long = {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m" * 5000}
    view = admission.workload_view({"metadata": {"name": "w"}, "status": {"conditions": [long]}})
    condition = view.condition("QuotaReserved")
    assert condition is not None and len(condition.message) == admission.MAX_MESSAGE


def test_a_status_write_keeps_kueues_conditions_and_unchanged_transition_times() -> None:
    existing = [
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m", "lastTransitionTime": "t0"},
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "",
            "lastTransitionTime": "t0",
        },
        {"type": "Requeued", "status": "True", "reason": "x", "message": "", "lastTransitionTime": "t0"},
    ]
    updates = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m", "lastTransitionTime": "t1"},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": "m", "lastTransitionTime": "t1"},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "", "lastTransitionTime": "t1"},
    ]
    merged = {c["type"]: c for c in admission.merged_conditions(existing, updates)}
    assert merged["Evicted"] == existing[0]
    assert (merged["QuotaReserved"]["status"], merged["QuotaReserved"]["lastTransitionTime"]) == ("False", "t1")
    assert (merged["Requeued"]["reason"], merged["Requeued"]["lastTransitionTime"]) == ("Preempted", "t0")
    assert merged["Admitted"]["lastTransitionTime"] == "t1"


def test_the_admission_placement_adds_to_the_workers_own_without_repeating_a_toleration() -> None:
    from trainingjob.builders.pod import QueuePlacement, desired_worker_pod

    own = {"key": "team", "operator": "Equal", "value": "nlp", "effect": "NoSchedule"}
    flavor = {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    placed = job(gpuPerWorker=1, scheduling={"nodeSelector": {"zone": "z1"}, "tolerations": [own]})
    queue = QueuePlacement({"pool": "a100"}, (own, flavor))
    spec = desired_worker_pod(placed, 0, 0, CONFIG, queue=queue)["spec"]
    assert spec["nodeSelector"]["zone"] == "z1" and spec["nodeSelector"]["pool"] == "a100"
    assert spec["tolerations"].count(own) == 1 and flavor in spec["tolerations"]
    assert "pool" not in desired_worker_pod(placed, 0, 0, CONFIG)["spec"].get("nodeSelector", {})
