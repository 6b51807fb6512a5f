"""The informers' store (operator/runtime/store.py): a re-list prunes what the listing lacks, and only changes to the
trimmed views report touched keys (a pod update the planner cannot see reconciles nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from trainingjob.operator.runtime import store as store_module
from trainingjob.operator.runtime.store import Index, ResourceStore
from trainingjob.operator.trainingjob.watches import disrupted_worker, trainingjob_body, worker_pod, worker_service

JOB_LABEL = "ml.example.com/job-name"


def pod(name: str, job: str, phase: str = "Running", version: str = "1", **extra: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "ml", "resourceVersion": version, "labels": {JOB_LABEL: job}}
    return {"metadata": metadata, "status": {"phase": phase, **extra}}


def pod_store() -> tuple[ResourceStore, dict[str, Index]]:
    indexes = {"worker_pods": Index()}
    return ResourceStore(indexes, {"worker_pods": worker_pod}), indexes


PREEMPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


def departing_store() -> tuple[ResourceStore, dict[str, Index]]:
    indexes = {"worker_pods": Index(), "departed_pods": Index()}
    return ResourceStore(indexes, {"worker_pods": worker_pod}, {"departed_pods": disrupted_worker}), indexes


def names(index: Index, key: tuple[str, str]) -> list[str]:
    return sorted(view.name for view in index.get(key, []))


def test_a_relist_deletes_objects_the_listing_no_longer_holds() -> None:
    store, indexes = pod_store()
    for i in range(3):
        store.upsert(pod(f"a-worker-{i}", "a"))
    store.upsert(pod("b-worker-0", "b"))
    listing = {("ml", n): store.file(pod(n, "a")) for n in ("a-worker-0", "a-worker-2")}
    touched = store.replaced(listing)
    assert names(indexes["worker_pods"], ("ml", "a")) == ["a-worker-0", "a-worker-2"]
    assert ("ml", "b") not in indexes["worker_pods"]
    assert set(touched) == {("worker_pods", ("ml", "a")), ("worker_pods", ("ml", "b"))}
    assert len(store) == 2


def test_a_relist_of_unchanged_objects_touches_nothing() -> None:
    store, _ = pod_store()
    body = pod("a-worker-0", "a")
    store.upsert(body)
    assert store.replaced({("ml", "a-worker-0"): store.file(body)}) == []


def test_an_update_outside_the_view_touches_nothing_and_a_phase_change_does() -> None:
    store, indexes = pod_store()
    assert store.upsert(pod("a-worker-0", "a", version="1")) == [("worker_pods", ("ml", "a"))]
    assert store.upsert(pod("a-worker-0", "a", version="2", hostIP="192.168.0.7")) == []
    assert store.upsert(pod("a-worker-0", "a", phase="Failed", version="3")) == [("worker_pods", ("ml", "a"))]
    assert [v.phase for v in indexes["worker_pods"][("ml", "a")]] == ["Failed"]


def test_a_relabelled_object_moves_between_keys_and_a_delete_empties_its_key() -> None:
    store, indexes = pod_store()
    store.upsert(pod("p", "a"))
    touched = store.upsert(pod("p", "b"))
    assert set(touched) == {("worker_pods", ("ml", "a")), ("worker_pods", ("ml", "b"))}
    assert list(indexes["worker_pods"]) == [("ml", "b")]
    assert store.delete(pod("p", "b")) == [("worker_pods", ("ml", "b"))]
    assert len(indexes["worker_pods"]) == 0 and len(store) == 0


def test_one_resource_feeds_several_indexes_and_objects_outside_an_index_stay_out() -> None:
    indexes = {"worker_services": Index(), "other": Index()}
    store = ResourceStore(indexes, {"worker_services": worker_service, "other": lambda body: None})
    service = {
        "metadata": {"name": "a-workers", "namespace": "ml", "labels": {JOB_LABEL: "a"}},
        "spec": {"ports": [{"name": "master", "port": 23456}]},
    }
    stray = {"metadata": {"name": "unrelated", "namespace": "ml", "labels": {JOB_LABEL: "a"}}, "spec": {}}
    store.upsert(service)
    assert store.upsert(stray) == []
    assert len(indexes["worker_services"][("ml", "a")]) == 1 and len(indexes["other"]) == 0


def test_job_bodies_are_stored_without_managed_fields_or_the_last_applied_copy() -> None:
    body = {
        "apiVersion": "ml.example.com/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {
            "name": "a",
            "namespace": "ml",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "team": "x"},
        },
        "spec": {"framework": "pytorch"},
    }
    key, stored = trainingjob_body(body)
    assert key == ("ml", "a")
    assert "managedFields" not in stored["metadata"] and stored["metadata"]["annotations"] == {"team": "x"}
    assert stored["spec"] == {"framework": "pytorch"} and body["metadata"]["managedFields"]


def test_a_pod_deleted_marked_disruption_target_is_remembered_until_its_name_returns() -> None:
    store, indexes = departing_store()
    store.upsert(pod("a-worker-1", "a"))
    preempted = pod("a-worker-1", "a", version="2", conditions=[PREEMPTED])
    touched = store.delete(preempted)
    assert set(touched) == {("worker_pods", ("ml", "a")), ("departed_pods", ("ml", "a"))}
    assert ("ml", "a") not in indexes["worker_pods"]
    [gone] = indexes["departed_pods"][("ml", "a")]
    assert (gone.name, gone.disruption_reason) == ("a-worker-1", "PreemptionByScheduler")
    store.upsert(pod("a-worker-1", "a", version="3"))  # the next attempt's worker takes the name
    assert ("ml", "a") not in indexes["departed_pods"]


def test_a_plain_delete_and_a_relist_record_no_departure() -> None:
    store, indexes = departing_store()
    store.upsert(pod("a-worker-0", "a"))
    store.delete(pod("a-worker-0", "a", version="2"))
    store.upsert(pod("a-worker-1", "a", conditions=[PREEMPTED]))
    store.replaced({})  # a listing has no final body to say how a pod went
    assert len(indexes["departed_pods"]) == 0 and len(indexes["worker_pods"]) == 0


def test_departures_are_bounded_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "DEPARTURES_KEPT", 3)
    store, indexes = departing_store()
    for i in range(5):
        store.delete(pod(f"j{i}-worker-0", f"j{i}", conditions=[PREEMPTED]))
    assert sorted(key[1] for key in indexes["departed_pods"]) == ["j2", "j3", "j4"]
    assert len(store.departed) == 3
