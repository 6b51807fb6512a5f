"""A spec change is judged by metadata.generation: served defaults, unknown fields and fingerprint changes of an
operator upgrade never restart workers; an edit of the workers' shape does, an edit of policy fields does not.

Proves: without_defaults drops fields equal to their schema default and fields the schema does not declare, and
keeps an explicit empty securityContext; spec_hash is the same for a spec with and without its defaults;
current_worker_spec keeps the recorded pod label while the generation holds, rebases the fingerprint, adopts the
pods of a status written before the record existed, and switches label only on a shape-changing edit; the planner
restarts nothing when a new default appears under a running job.
"""

from __future__ import annotations

import pytest

from tests.unit.test_planner import CONFIG, NOW, children, kinds, make_job, pod, stored
from trainingjob.api.schema_spec import spec_schema
from trainingjob.api.status import WorkerSpec
from trainingjob.api.types import TrainingJob
from trainingjob.api.versions import V1ALPHA1
from trainingjob.builders.common import spec_hash, without_defaults
from trainingjob.planning.actions import CreateChild, DeleteChild
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.spec_version import current_worker_spec

RUNNING = {"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "observedGeneration": 2}


def job_at(generation: int, status: dict | None = None, **spec) -> TrainingJob:
    job = make_job(status, **spec)
    body = {
        "metadata": {"name": job.name, "namespace": job.namespace, "uid": job.uid, "generation": generation},
        "spec": dict(job.raw_spec),
        "status": job.status.to_dict(),
    }
    return TrainingJob.from_body(body)


def test_defaults_and_unknown_fields_do_not_count() -> None:
    schema = spec_schema(V1ALPHA1)
    served = {
        "framework": "pytorch",
        "workers": 1,
        "gpuPerWorker": 0,
        "networking": {"masterPort": 29500},
        "checkpoint": {"enabled": False, "storage": {"size": "1Gi", "accessModes": ["ReadWriteMany"]}},
        "aFieldOfANewerCrd": {"x": 1},
    }
    assert without_defaults(served, schema) == {"framework": "pytorch", "checkpoint": {"storage": {"size": "1Gi"}}}


def test_an_explicit_empty_security_context_is_not_a_default() -> None:
    assert without_defaults({"securityContext": {}}, spec_schema(V1ALPHA1)) == {"securityContext": {}}


def test_spec_hash_is_the_same_with_and_without_the_servers_defaults() -> None:
    bare = make_job(workers=2)
    served = make_job(workers=2, gpuPerWorker=0, checkpointDir="/checkpoints", networking={}, newField="default")
    assert spec_hash(bare) == spec_hash(served)
    assert spec_hash(make_job(workers=3)) != spec_hash(bare)


@pytest.mark.parametrize("generation", [2, 5])
def test_the_recorded_label_holds_while_the_generation_does(generation: int) -> None:
    record = {"generation": generation, "podSpecHash": "built-by-v1", "specHash": "old-fingerprint"}
    job = job_at(generation, {**RUNNING, "workerSpec": record})
    spec = current_worker_spec(job, [])
    assert spec == WorkerSpec(generation, "built-by-v1", spec_hash(job)), "label kept, fingerprint rebased"


def test_an_edit_of_policy_fields_keeps_the_workers() -> None:
    before = job_at(2, RUNNING, workers=2)
    record = WorkerSpec(2, "label", spec_hash(before)).to_dict()
    edited = job_at(3, {**RUNNING, "workerSpec": record}, workers=2, backoffLimit=7)
    assert current_worker_spec(edited, []).pod_hash == "label"


def test_an_edit_of_the_workers_shape_takes_the_new_fingerprint() -> None:
    before = job_at(2, RUNNING, workers=2)
    record = WorkerSpec(2, "label", spec_hash(before)).to_dict()
    edited = job_at(3, {**RUNNING, "workerSpec": record}, workers=2, image="other")
    assert current_worker_spec(edited, []) == WorkerSpec(3, spec_hash(edited), spec_hash(edited))


def test_pods_of_an_older_operator_are_adopted_when_the_spec_was_not_edited() -> None:
    job = job_at(2, RUNNING)
    legacy = [pod(job, 0, fingerprint="legacy"), pod(job, 1, fingerprint="legacy")]
    assert current_worker_spec(job, legacy).pod_hash == "legacy"
    edited_meanwhile = job_at(3, RUNNING)
    assert current_worker_spec(edited_meanwhile, legacy).pod_hash == spec_hash(edited_meanwhile)


def test_a_new_default_under_a_running_job_restarts_nothing() -> None:
    job = job_at(2, RUNNING, workers=2)
    pods = (pod(job, 0, fingerprint="label"), pod(job, 1, fingerprint="label"))
    status = {**RUNNING, "workerSpec": WorkerSpec(2, "label", spec_hash(job)).to_dict()}
    served = job_at(2, status, workers=2, newDefaultedField={"enabled": True})
    result = plan(served, children(served, *pods), NOW, CONFIG)
    assert kinds(result.actions, DeleteChild) == [] and kinds(result.actions, CreateChild) == []
    assert stored(result)["phase"] == "Running" and stored(result).get("attempt", 0) == 0
    assert stored(result)["workerSpec"]["podSpecHash"] == "label"


def test_new_workers_carry_the_recorded_label() -> None:
    job = job_at(2, {**RUNNING, "workerSpec": {"generation": 2, "podSpecHash": "label", "specHash": "x"}})
    result = plan(job, children(job, pod(job, 0, fingerprint="label")), NOW, CONFIG)
    [created] = kinds(result.actions, CreateChild)
    assert created.manifest["metadata"]["labels"]["ml.example.com/spec-hash"] == "label"
