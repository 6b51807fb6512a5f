"""scheduling/gang.py: the gang object and pod membership of each provider, field by field against the upstream API
types (k8s.io/api v0.35 scheduling/v1alpha1 Workload and core/v1 WorkloadReference, v0.36 scheduling/v1alpha2
PodGroup and PodSchedulingGroup, scheduler-plugins v1alpha1 PodGroup, Volcano v1beta1 PodGroup), what each
object's status says about placement, which provider a job gets, and gang names.

Only the native v1alpha1 shape runs against a real scheduler here (tests/integration/test_gang_*.py); the other
three are proven by shape alone, as docs/trainingjob.md says.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.config import OperatorConfig
from trainingjob.scheduling.gang import (
    PROVIDERS,
    Coscheduling,
    GangState,
    NativePodGroup,
    NativeWorkload,
    Volcano,
    choose,
    gang_name,
    provider_for,
    watched,
)

ALL = frozenset(p.api for p in PROVIDERS)
NATIVE_1_35 = frozenset({NativeWorkload.api})


def make_job(workers: int = 4, gpus: int = 1, **scheduling: Any) -> TrainingJob:
    spec = {
        "framework": "pytorch",
        "image": "train:1",
        "command": ["train"],
        "workers": workers,
        "gpuPerWorker": gpus,
        "resources": {"requests": {"cpu": "500m", "memory": "4Gi"}},
        "scheduling": scheduling,
    }
    return TrainingJob.from_body({"metadata": {"name": "mnist", "namespace": "ml", "uid": "uid-1"}, "spec": spec})


def test_native_workload_is_the_1_35_shape() -> None:
    job = make_job()
    body = NativeWorkload().manifest(job, "mnist-gang-0", 4, {})
    assert (body["apiVersion"], body["kind"]) == ("scheduling.k8s.io/v1alpha1", "Workload")
    assert body["spec"] == {
        "controllerRef": {"apiGroup": k.GROUP, "kind": k.KIND, "name": "mnist"},
        "podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 4}}}],
    }
    metadata = body["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("mnist-gang-0", "ml")
    assert metadata["labels"] == {k.LABEL_JOB_NAME: "mnist", k.LABEL_MANAGED_BY: k.MANAGED_BY}
    [owner] = metadata["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        k.KIND,
        "uid-1",
        True,
        True,
    )
    membership = NativeWorkload().membership("mnist-gang-0")
    assert membership.spec == {"workloadRef": {"name": "mnist-gang-0", "podGroup": "workers"}}
    assert not membership.labels and not membership.annotations


def test_native_pod_group_is_the_1_36_shape() -> None:
    body = NativePodGroup().manifest(make_job(), "mnist-gang-2", 3, {})
    assert (body["apiVersion"], body["kind"]) == ("scheduling.k8s.io/v1alpha2", "PodGroup")
    assert body["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
    assert NativePodGroup().membership("mnist-gang-2").spec == {"schedulingGroup": {"podGroupName": "mnist-gang-2"}}


def test_coscheduling_pod_group_has_min_member_resources_and_the_pod_label() -> None:
    body = Coscheduling().manifest(make_job(), "mnist-gang-0", 4, {"cpu": "2", k.GPU_RESOURCE: "4"})
    assert (body["apiVersion"], body["kind"]) == ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
    assert body["spec"] == {"minMember": 4, "minResources": {"cpu": "2", k.GPU_RESOURCE: "4"}}
    membership = Coscheduling().membership("mnist-gang-0")
    assert membership.labels == {"scheduling.x-k8s.io/pod-group": "mnist-gang-0"}
    assert membership.spec == {"schedulerName": "scheduler-plugins-scheduler"}


def test_volcano_pod_group_has_queue_priority_and_the_pod_annotation() -> None:
    job = make_job(priorityClassName="high", schedulerName="volcano", gang={"queue": "research"})
    body = Volcano().manifest(job, "mnist-gang-0", 4, {k.GPU_RESOURCE: "4"})
    assert (body["apiVersion"], body["kind"]) == ("scheduling.volcano.sh/v1beta1", "PodGroup")
    assert body["spec"] == {
        "minMember": 4,
        "queue": "research",
        "minResources": {k.GPU_RESOURCE: "4"},
        "priorityClassName": "high",
    }
    assert Volcano().manifest(make_job(), "g", 2, {})["spec"]["queue"] == "default"
    membership = Volcano().membership("mnist-gang-0")
    assert membership.annotations == {"scheduling.k8s.io/group-name": "mnist-gang-0"}


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: f"{p.api.group}/{p.api.version}")
def test_each_provider_reads_back_the_min_count_it_wrote_and_is_found_by_its_api(provider) -> None:
    body = provider.manifest(make_job(), "mnist-gang-1", 3, {})
    body["metadata"]["uid"] = "gang-uid"
    view = provider.view(body)
    assert (view.name, view.min_count, view.uid, view.controller_uid) == ("mnist-gang-1", 3, "gang-uid", "uid-1")
    assert (view.api_version, view.kind) == (body["apiVersion"], body["kind"])
    assert provider_for(body["apiVersion"], body["kind"]) is provider
    assert view.state == GangState() and not view.deleting


@pytest.mark.parametrize(
    ("provider", "status", "state"),
    [
        (NativePodGroup(), {}, GangState()),
        (
            NativePodGroup(),
            {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "message": ""}]},
            GangState(True, "Scheduled"),
        ),
        (
            NativePodGroup(),
            {
                "conditions": [
                    {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
                ]
            },
            GangState(False, "Unschedulable", "m"),
        ),
        (
            NativePodGroup(),
            {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]},
            GangState(False, "PreemptionByScheduler"),
        ),
        (Coscheduling(), {"phase": "Scheduling"}, GangState(False, "Scheduling", "PodGroup phase Scheduling")),
        (Coscheduling(), {"phase": "Running"}, GangState(True, "Running", "PodGroup phase Running")),
        (Volcano(), {"phase": "Inqueue"}, GangState(False, "Inqueue", "PodGroup phase Inqueue")),
        (
            Volcano(),
            {
                "phase": "Pending",
                "conditions": [
                    {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "3/4 tasks"}
                ],
            },
            GangState(False, "NotEnoughResources", "3/4 tasks"),
        ),
        (Volcano(), {"phase": "Running"}, GangState(True, "Running", "PodGroup phase Running")),
    ],
)
def test_what_a_gang_objects_status_says_about_placement(provider, status: dict, state: GangState) -> None:
    body = provider.manifest(make_job(), "g", 2, {})
    body["status"] = status
    assert provider.view(body).state == state


@pytest.mark.parametrize(
    ("workers", "scheduling", "served", "expected"),
    [
        (4, {}, NATIVE_1_35, NativeWorkload),  # Auto, default scheduler: the native API
        (4, {}, ALL, NativePodGroup),  # the newest native API wins
        (4, {}, frozenset(), None),  # nothing served: placed one by one
        (1, {}, NATIVE_1_35, None),  # one worker needs no gang
        (4, {"gang": {"minCount": 1}}, NATIVE_1_35, None),
        (4, {"schedulerName": "default-scheduler"}, NATIVE_1_35, NativeWorkload),
        (4, {"schedulerName": "volcano"}, ALL, Volcano),
        (4, {"schedulerName": "volcano"}, NATIVE_1_35, None),  # Volcano not installed: its scheduler places them
        (4, {"schedulerName": "scheduler-plugins-scheduler"}, ALL, Coscheduling),
        (4, {"schedulerName": "my-scheduler"}, NATIVE_1_35, None),
        (4, {"gang": {"provider": "Disabled"}}, ALL, None),
        (4, {"gang": {"provider": "Native"}, "schedulerName": "my-scheduler"}, NATIVE_1_35, NativeWorkload),
        (1, {"gang": {"provider": "Coscheduling"}}, ALL, Coscheduling),  # named: even for one worker
    ],
)
def test_which_provider_a_job_gets(workers: int, scheduling: dict, served: frozenset, expected: type | None) -> None:
    choice = choose(make_job(workers, **scheduling), served)
    assert choice.unavailable is None
    assert (type(choice.provider) if choice.provider else None) is expected


def test_a_named_provider_the_cluster_does_not_serve_is_unavailable_with_the_api_it_needs() -> None:
    choice = choose(make_job(gang={"provider": "Volcano"}), NATIVE_1_35)
    assert choice.provider is None
    assert "PodGroup (scheduling.volcano.sh/v1beta1)" in choice.unavailable
    assert "restart it" in choice.unavailable
    native = choose(make_job(gang={"provider": "Native"}), frozenset()).unavailable
    assert "PodGroup (scheduling.k8s.io/v1alpha2) or Workload (scheduling.k8s.io/v1alpha1)" in native


def test_min_count_defaults_to_the_workers_and_never_exceeds_them() -> None:
    assert choose(make_job(4), NATIVE_1_35).min_count == 4
    assert choose(make_job(4, gang={"minCount": 3}), NATIVE_1_35).min_count == 3
    assert choose(make_job(4, gang={"minCount": 9}), NATIVE_1_35).min_count == 4  # scaled below minCount


def test_only_served_providers_are_watched_each_in_its_own_cache() -> None:
    assert [p.api for p in watched(NATIVE_1_35)] == [NativeWorkload.api]
    assert len({p.index for p in PROVIDERS}) == len(PROVIDERS)


@pytest.mark.parametrize(("name", "attempt"), [("mnist", 0), ("a" * k.MAX_JOB_NAME_LENGTH, 10**6), ("b" * 51, 7)])
def test_gang_names_are_deterministic_label_values(name: str, attempt: int) -> None:
    gang = gang_name(name, attempt)
    assert gang == gang_name(name, attempt) and len(gang) <= 63 and gang.endswith(f"-gang-{attempt}")
    assert gang != gang_name(name, attempt + 1)


def test_the_pod_builder_adds_membership_and_the_gang_label_but_the_jobs_scheduler_name_wins() -> None:
    job = make_job(schedulerName="volcano-v2")
    pod = desired_worker_pod(job, 1, 0, OperatorConfig(), gang=Volcano().membership("mnist-gang-0"))
    assert pod["metadata"]["labels"][k.LABEL_GANG] == "mnist-gang-0"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "mnist-gang-0"
    assert pod["spec"]["schedulerName"] == "volcano-v2"
    pod = desired_worker_pod(make_job(), 1, 0, OperatorConfig(), gang=Coscheduling().membership("g"))
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "g"
    pod = desired_worker_pod(make_job(), 1, 0, OperatorConfig(), gang=NativeWorkload().membership("g"))
    assert pod["spec"]["workloadRef"] == {"name": "g", "podGroup": "workers"} and "schedulerName" not in pod["spec"]
    plain = desired_worker_pod(make_job(), 1, 0, OperatorConfig())
    assert k.LABEL_GANG not in plain["metadata"]["labels"] and "workloadRef" not in plain["spec"]
