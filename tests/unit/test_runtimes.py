"""Runtimes, pure (api/runtimes.py, reconcile/runtimes.py, the planner's use of them, the controller's indexes): the
merge rules, the recorded snapshot that later edits cannot reach, waiting for a runtime the cache lacks, and what
fails with InvalidSpec."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from trainingjob.api import constants as k
from trainingjob.api.runtimes import TEMPLATE_FIELDS, RuntimeRef, RuntimeSnapshot, effective_spec
from trainingjob.api.schema_runtime import runtime_crd_manifest
from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.operator.trainingjob.watches import job_awaiting_runtime, jobs_of_runtime, runtime_view
from trainingjob.reconcile.observed import ObservedChildren
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.runtimes import RUNTIME_GRACE_SECONDS, resolve_runtime, runtime_gives

NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
TEMPLATE = {
    "image": "registry.example/train:1",
    "command": ["torchrun", "/app/train.py"],
    "env": [{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}],
    "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},
    "scheduling": {
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"a": 1}},
    },
    "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}}],
    "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
    "hyperparameters": {"lr": 0.1, "epochs": 3},
    "networking": {"backend": "gloo"},
}


def snapshot(generation: int = 1, framework: str = "pytorch", **template: Any) -> RuntimeSnapshot:
    return RuntimeSnapshot(k.CLUSTER_RUNTIME_KIND, "torch", generation, framework, {**TEMPLATE, **template})


def job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, age: float = 60) -> TrainingJob:
    created = format_time(NOW - datetime.timedelta(seconds=age))
    body = {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "generation": 1, "creationTimestamp": created},
        "spec": {"framework": "pytorch", "workers": 2, "runtimeRef": {"name": "torch"}, **(spec or {})},
        "status": status or {},
    }
    return TrainingJob.from_body(body)


def test_the_jobs_own_fields_win_by_the_merge_rules() -> None:
    spec = {
        "image": "mine:2",
        "env": [{"name": "B", "value": "job"}, {"name": "C", "value": "job"}],
        "resources": {"limits": {"memory": "2Gi"}},
        "scheduling": {"tolerations": [{"key": "mine", "operator": "Exists"}], "affinity": {"podAffinity": {}}},
        "volumeMounts": [{"name": "own", "mountPath": "/shared"}],
        "hyperparameters": {"lr": 0.5},
        "networking": {"masterPort": 29500},
    }
    merged = effective_spec(TEMPLATE, spec)
    assert merged["image"] == "mine:2" and merged["command"] == TEMPLATE["command"]
    assert merged["env"] == [
        {"name": "A", "value": "runtime"},
        {"name": "B", "value": "job"},
        {"name": "C", "value": "job"},
    ]
    assert merged["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    assert merged["scheduling"]["tolerations"] == [
        {"key": "gpu", "operator": "Exists"},
        {"key": "mine", "operator": "Exists"},
    ]
    assert merged["scheduling"]["affinity"] == {"podAffinity": {}}  # replaced whole, never half of each
    assert merged["scheduling"]["nodeSelector"] == {"pool": "gpu"}
    assert merged["volumeMounts"] == [{"name": "own", "mountPath": "/shared"}]  # by mountPath
    assert merged["hyperparameters"] == {"lr": 0.5, "epochs": 3}
    assert merged["networking"] == {"backend": "gloo", "masterPort": 29500}
    assert TEMPLATE["env"][1]["value"] == "runtime"  # the template itself is left alone


def test_the_runtime_crds_template_covers_exactly_the_merged_fields_without_defaults() -> None:
    for kind in k.RUNTIME_KINDS:
        crd = runtime_crd_manifest(kind)
        assert crd["spec"]["scope"] == ("Cluster" if kind == k.CLUSTER_RUNTIME_KIND else "Namespaced")
        template = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
            "template"
        ]
        assert sorted(template["properties"]) == sorted(TEMPLATE_FIELDS)
        assert '"default"' not in str(template).replace("'", '"')


def test_a_cached_runtime_is_recorded_and_the_record_wins_over_later_versions() -> None:
    first = resolve_runtime(job(), snapshot(1), NOW)
    assert first.problem is None and first.job.spec.image == "registry.example/train:1"
    assert first.job.status.runtime["generation"] == 1
    assert first.job.spec.env[0] == {"name": "A", "value": "runtime"}
    started = job(status=first.job.status.to_dict())
    edited = resolve_runtime(started, snapshot(2, image="other:9"), NOW)
    assert edited.job.spec.image == "registry.example/train:1"  # built from the record, not the edit
    assert edited.job.status.runtime["generation"] == 1
    gone = resolve_runtime(started, None, NOW)  # a deleted runtime stops no job that started from it
    assert gone.problem is None and gone.job.spec.image == "registry.example/train:1"


def test_a_runtime_not_cached_is_waited_for_then_the_job_is_invalid() -> None:
    young = resolve_runtime(job(age=10), None, NOW)
    assert (
        young.waiting == pytest.approx(RUNTIME_GRACE_SECONDS - 10) and young.missing == "ClusterTrainingRuntime torch"
    )
    old = resolve_runtime(job(age=RUNTIME_GRACE_SECONDS + 1), None, NOW)
    assert old.problem == "spec.runtimeRef: ClusterTrainingRuntime torch does not exist"
    namespaced = job({"runtimeRef": {"kind": k.NAMESPACED_RUNTIME_KIND, "name": "t"}}, age=60)
    assert resolve_runtime(namespaced, None, NOW).problem == (
        "spec.runtimeRef: TrainingRuntime t in namespace ns does not exist"
    )


@pytest.mark.parametrize(
    ("runtime", "words"),
    [
        (snapshot(framework="xgboost"), "is for xgboost jobs, and this job's framework is pytorch"),
        (snapshot(image=None), "neither the job nor ClusterTrainingRuntime torch sets an image"),
    ],
)
def test_a_runtime_the_job_cannot_start_from_is_a_problem(runtime: RuntimeSnapshot, words: str) -> None:
    if runtime.template.get("image") is None:
        runtime = RuntimeSnapshot(runtime.kind, runtime.name, 1, "pytorch", {"command": ["x"]})
    assert words in (resolve_runtime(job(), runtime, NOW).problem or "")


def test_a_job_without_a_runtime_is_planned_as_it_is() -> None:
    plain = TrainingJob.from_body({"metadata": {"name": "p"}, "spec": {"framework": "pytorch", "image": "i"}})
    assert resolve_runtime(plain, snapshot(), NOW).job is plain


def test_the_planner_builds_workers_from_the_runtime_and_records_it() -> None:
    planned = plan(job(), ObservedChildren(runtime=snapshot()), NOW, OperatorConfig())
    assert planned.status.runtime["name"] == "torch"
    pods = [a.manifest for a in planned.actions if getattr(a, "manifest", {}).get("kind") == "Pod"]
    assert pods, planned.actions
    container = pods[0]["spec"]["containers"][0]
    assert container["image"] == "registry.example/train:1"
    assert container["command"] == ["torchrun", "/app/train.py"]
    assert {"name": "A", "value": "runtime"} in container["env"]


def test_the_planner_waits_for_a_missing_runtime_then_fails_the_job() -> None:
    waiting = plan(job(age=5), ObservedChildren(), NOW, OperatorConfig())
    assert waiting.status.phase == "Pending" and waiting.requeue_after == pytest.approx(RUNTIME_GRACE_SECONDS - 5)
    assert [c["reason"] for c in waiting.status.conditions or () if c["type"] == "Blocked"] == ["RuntimeNotFound"]
    assert not [a for a in waiting.actions if getattr(a, "manifest", {}).get("kind") == "Pod"]
    failed = plan(job(age=600), ObservedChildren(), NOW, OperatorConfig())
    assert (failed.status.phase, failed.events[-1].reason) == ("Failed", "InvalidSpec")


def test_only_jobs_without_a_record_wait_for_their_runtime() -> None:
    body = {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"runtimeRef": {"name": "torch"}}}
    assert job_awaiting_runtime(body) == ((k.CLUSTER_RUNTIME_KIND, "", "torch"), ("ns", "j"))
    assert job_awaiting_runtime({**body, "status": {"runtime": {"name": "torch"}}}) is None
    assert job_awaiting_runtime({"metadata": {"name": "x", "namespace": "ns"}, "spec": {}}) is None
    indexes = {"jobs_awaiting_runtime": {(k.CLUSTER_RUNTIME_KIND, "", "torch"): [("ns", "j")]}}
    assert jobs_of_runtime(k.CLUSTER_RUNTIME_KIND)(indexes, ("", "torch")) == [("ns", "j")]
    runtime_body = {"metadata": {"name": "torch", "generation": 4}, "spec": {"framework": "jax", "template": {}}}
    key, view = runtime_view(k.CLUSTER_RUNTIME_KIND)(runtime_body)
    assert key == ("", "torch") and (view.kind, view.generation, view.framework) == (k.CLUSTER_RUNTIME_KIND, 4, "jax")
    assert RuntimeRef.from_spec({"runtimeRef": {"name": "torch"}}) == RuntimeRef(k.CLUSTER_RUNTIME_KIND, "torch")


def test_what_a_runtime_gives_is_read_from_the_record_else_the_cache() -> None:
    """The reconciler asks whether the pods carry a securityContext of the job's runtime (then a PodSecurity
    refusal is the runtime's, not a sign that the namespace needs the operator's restricted one)."""
    restricted = snapshot(securityContext={"runAsNonRoot": True})
    assert runtime_gives(job(), restricted, "securityContext")
    assert not runtime_gives(job(), snapshot(), "securityContext")
    assert not runtime_gives(job(), None, "securityContext")
    record = {"runtime": snapshot().to_status()}  # recorded without one: a later edit of the runtime does not count
    assert not runtime_gives(job(status=record), restricted, "securityContext")
    plain = TrainingJob.from_body({"metadata": {"name": "j", "namespace": "ns"}, "spec": {"framework": "pytorch"}})
    assert not runtime_gives(plain, restricted, "securityContext")
