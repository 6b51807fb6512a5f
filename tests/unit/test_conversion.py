"""api/conversion.py: v1alpha1 <-> v1 without loss, for generated specs and statuses (hypothesis), and the mapping
of the guide's words (state, progress text, currentEpoch) to and from v1alpha1's."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainingjob.api import constants as c
from trainingjob.api.conversion import convert, convert_spec, convert_status, progress_text, status_in, to_internal
from trainingjob.api.types import JobSpec, TrainingJob
from trainingjob.api.versions import SHAPES, field_names_as_written
from trainingjob.api.versions import V1 as V1_SHAPE
from trainingjob.api.versions import V1ALPHA1 as V1ALPHA1_SHAPE
from trainingjob.builders.common import spec_hash

V1ALPHA1 = f"{c.GROUP}/{c.V1ALPHA1}"
V1 = f"{c.GROUP}/{c.V1}"

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
scalars = st.one_of(st.integers(-1000, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), names)
# What a future field of both versions may hold: anything JSON.
json_values = st.recursive(
    scalars | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def checkpoints(draw: st.DrawFn, defaulted: bool) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {}
    if defaulted or draw(st.booleans()):
        checkpoint["enabled"] = draw(st.booleans())
    optional = {
        "dir": st.sampled_from(["/ckpt", "/mnt/checkpoints"]),
        "interval": st.integers(1, 50),
        "keepLast": st.integers(1, 10),
        "deleteOnCompletion": st.booleans(),
        "storage": st.one_of(
            st.fixed_dictionaries({"claimName": names}, optional={"accessModes": st.just(["ReadWriteMany"])}),
            st.fixed_dictionaries(
                {"size": st.sampled_from(["10Gi", 5368709120])},
                optional={"storageClassName": names, "storageClass": names},  # storageClass: seed 002's name
            ),
            st.fixed_dictionaries({"type": st.sampled_from(["s3", "gcs"]), "path": st.just("s3://bucket/prefix")}),
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            checkpoint[key] = draw(strategy)
    return checkpoint


role = st.fixed_dictionaries(
    {},
    optional={
        "replicas": st.integers(1, 4),
        "gpus": st.integers(0, 8),
        "command": st.lists(names, min_size=1, max_size=2),
        "env": st.lists(st.fixed_dictionaries({"name": st.just("ROLE_LEVEL"), "value": names}), max_size=1),
        "restartPolicy": st.sampled_from(c.RESTART_POLICIES),
    },
)
roles = st.fixed_dictionaries({}, optional={name: role for name in c.FRAMEWORK_ROLES})


@st.composite
def v1alpha1_specs(draw: st.DrawFn, defaulted: bool = True) -> dict[str, Any]:
    """Specs as the API server hands them to a conversion (defaulted: fields whose default differs between the
    versions are present), with any subset of the other fields, and fields no version has yet."""
    spec: dict[str, Any] = {
        "framework": draw(st.sampled_from(c.FRAMEWORKS)),
        "image": draw(names),
        "command": draw(st.lists(names, min_size=1, max_size=3)),
    }
    if defaulted or draw(st.booleans()):
        spec["gpuPerWorker"] = draw(st.integers(0, 8))
    optional = {
        "workers": st.integers(1, 1024),
        "args": st.lists(names, max_size=3),
        "model": names,
        "dataset": names,
        "hyperparameters": st.dictionaries(names, scalars, max_size=4),
        "checkpointDir": st.just("/checkpoints"),
        "checkpointInterval": st.integers(1, 10),
        "checkpoint": checkpoints(defaulted),
        "dataVolume": st.fixed_dictionaries({"claimName": names, "readOnly": st.booleans()}),
        "networking": st.fixed_dictionaries({"masterPort": st.integers(1024, 65535)}),
        "restartPolicy": st.sampled_from(c.RESTART_POLICIES),
        "backoffLimit": st.integers(0, 100),
        "suspend": st.booleans(),
        "env": st.lists(st.fixed_dictionaries({"name": st.just("LOG_LEVEL"), "value": names}), max_size=1),
        "resources": st.fixed_dictionaries({"limits": st.fixed_dictionaries({"cpu": st.just("2")})}),
        "scheduling": st.fixed_dictionaries(
            {"priorityClassName": names},
            optional={
                "gang": st.fixed_dictionaries(
                    {"provider": st.sampled_from(c.GANG_PROVIDERS)},
                    optional={"minCount": st.integers(1, 1024), "queue": names},
                )
            },
        ),
        "failurePolicy": st.fixed_dictionaries({"restartStrategy": st.sampled_from(c.RESTART_STRATEGIES)}),
        "roles": roles,
        "elastic": st.fixed_dictionaries(
            {"minWorkers": st.integers(1, 4), "maxWorkers": st.integers(4, 8)}, optional={"maxRestarts": st.just(3)}
        ),
        "futureField": json_values,  # a field added to both versions later is converted without code for it
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            spec[key] = draw(strategy)
    return spec


@st.composite
def v1alpha1_statuses(draw: st.DrawFn) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if draw(st.booleans()):
        status["phase"] = draw(st.sampled_from(c.PHASES))
    progress_fields = {
        "percent": st.floats(0, 100),
        "epoch": st.integers(0, 100),
        "totalEpochs": st.integers(0, 100),
        "step": st.integers(0, 10**6),
        "metrics": st.dictionaries(names, st.floats(allow_nan=False, allow_infinity=False), max_size=3),
        "estimatedRemainingSeconds": st.integers(0, 10**5),
        "lastUpdateTime": st.just("2026-11-23T12:00:00Z"),
    }
    optional = {
        "workers": st.integers(0, 16),
        "restartCount": st.integers(0, 5),
        "attempt": st.integers(0, 5),
        "message": names,
        "conditions": st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["Running", "Succeeded"]), "status": st.just("True")}),
            max_size=2,
        ),
        "progress": st.fixed_dictionaries({}, optional=progress_fields),
        "lastCheckpoint": st.fixed_dictionaries({"epoch": st.integers(0, 9)}),
        "gang": st.fixed_dictionaries(
            {"name": names, "state": st.sampled_from(["Scheduled", "Waiting"])},
            optional={"minCount": st.integers(1, 16), "placed": st.integers(0, 16), "reason": names},
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            status[key] = draw(strategy)
    return status


def job(spec: dict[str, Any], status: dict[str, Any] | None = None, api_version: str = V1ALPHA1) -> dict[str, Any]:
    body = {
        "apiVersion": api_version,
        "kind": c.KIND,
        "metadata": {"name": "train", "namespace": "ml", "uid": "u-1", "labels": {"a": "b"}},
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return body


# --- properties -----------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(v1alpha1_specs(), v1alpha1_statuses())
def test_v1alpha1_to_v1_and_back_is_lossless(spec: dict[str, Any], status: dict[str, Any]) -> None:
    original = job(spec, status)
    snapshot = copy.deepcopy(original)
    there = convert(original, V1)
    assert there["apiVersion"] == V1 and there["metadata"] == original["metadata"]
    assert convert(there, V1ALPHA1) == snapshot
    assert original == snapshot, "conversion never changes its input"


@settings(max_examples=150, deadline=None)
@given(v1alpha1_specs(), v1alpha1_statuses())
def test_a_conversion_given_its_input_converts_alike_and_a_copying_one_shares_nothing(
    spec: dict[str, Any], status: dict[str, Any]
) -> None:
    """The webhook gives away the body it parsed (owned): same answer, without the copies."""
    for original in (job(spec, status), convert(job(spec, status), V1)):
        target = V1 if original["apiVersion"] == V1ALPHA1 else V1ALPHA1
        copied = convert(original, target)
        assert convert(copy.deepcopy(original), target, owned=True) == copied
        snapshot = copy.deepcopy(original)
        scribble(copied)
        assert original == snapshot, "a copying conversion's result shares nothing with its input"


def scribble(value: Any) -> None:
    """Change every dict and list inside `value` in place."""
    if isinstance(value, dict):
        for inner in list(value.values()):
            scribble(inner)
        value["scribbled"] = True
    elif isinstance(value, list):
        for inner in value:
            scribble(inner)
        value.append("scribbled")


@settings(max_examples=150, deadline=None)
@given(v1alpha1_specs(), v1alpha1_statuses())
def test_v1_to_v1alpha1_and_back_is_lossless_for_what_the_operator_writes(
    spec: dict[str, Any], status: dict[str, Any]
) -> None:
    """v1 objects the operator and users write: statuses derived from the internal one, any v1 spec."""
    v1 = convert(job(spec, status), V1)
    assert convert(convert(v1, V1ALPHA1), V1) == v1


@settings(max_examples=150, deadline=None)
@given(v1alpha1_specs(defaulted=False))
def test_a_spec_means_the_same_in_every_version_even_without_defaults(spec: dict[str, Any]) -> None:
    """Fields whose default differs (gpus, checkpoint.enabled) are written out, so nothing changes meaning."""
    internal = JobSpec.from_dict(spec)
    v1_spec = convert_spec(spec, V1ALPHA1_SHAPE, V1_SHAPE)
    assert JobSpec.from_dict(convert_spec(v1_spec, V1_SHAPE, V1ALPHA1_SHAPE)) == internal
    assert TrainingJob.from_body(job(v1_spec, api_version=V1)).spec == internal


@settings(max_examples=100, deadline=None)
@given(v1alpha1_specs(), v1alpha1_statuses())
def test_the_operator_reads_every_version_alike(spec: dict[str, Any], status: dict[str, Any]) -> None:
    """Also the workers' spec hash: an operator that watched v1alpha1, upgraded to one watching v1, restarts no job."""
    original = TrainingJob.from_body(job(spec, status))
    from_v1 = TrainingJob.from_body(convert(job(spec, status), V1))
    assert (from_v1.spec, from_v1.raw_spec, from_v1.status) == (original.spec, original.raw_spec, original.status)
    assert spec_hash(from_v1) == spec_hash(original)


# --- the guide's names and words ------------------------------------------------------------------------------


def test_the_guides_job_reads_as_the_v1alpha1_job_it_is() -> None:
    guide = {
        "model": "resnet50",
        "dataset": "imagenet",
        "numWorkers": 2,
        "gpusPerWorker": 1,
        "hyperparameters": {"learningRate": 0.001, "batchSize": 32, "epochs": 10},
        "checkpoint": {"frequency": 5, "storage": {"type": "s3", "path": "s3://ckpt/resnet"}},
    }
    spec = convert_spec(guide, V1_SHAPE, V1ALPHA1_SHAPE)
    assert spec == {
        "model": "resnet50",
        "dataset": "imagenet",
        "workers": 2,
        "gpuPerWorker": 1,
        "framework": "pytorch",
        "hyperparameters": {"learningRate": 0.001, "batchSize": 32, "epochs": 10},
        "checkpoint": {"interval": 5, "enabled": True, "storage": {"type": "s3", "path": "s3://ckpt/resnet"}},
    }


def test_defaults_that_differ_are_written_out() -> None:
    """A v1alpha1 job without gpuPerWorker has no GPU; in v1 a missing gpusPerWorker would mean one."""
    assert convert_spec({"checkpoint": {}}, V1ALPHA1_SHAPE, V1_SHAPE) == {
        "gpusPerWorker": 0,
        "checkpoint": {"enabled": False},
    }
    assert convert_spec({}, V1_SHAPE, V1ALPHA1_SHAPE) == {"gpuPerWorker": 1, "framework": "pytorch"}


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ({"phase": "Pending"}, "Pending"),
        ({"phase": "Pending", "workers": 0}, "Pending"),
        ({"phase": "Pending", "workers": 2}, "Initializing"),
        ({"phase": "Running", "workers": 2}, "Running"),
        ({"phase": "Restarting"}, "Restarting"),
        ({"phase": "Succeeded"}, "Completed"),
        ({"phase": "Failed"}, "Failed"),
        ({"phase": "Suspended"}, "Suspended"),
    ],
)
def test_phases_map_to_the_guides_states(status: dict[str, Any], state: str) -> None:
    v1 = status_in(status, c.V1)
    assert v1["state"] == state and "phase" not in v1
    assert state in c.STATES
    assert convert_status(v1, SHAPES[c.V1], SHAPES[c.V1ALPHA1]) == status


def test_progress_is_spread_the_guides_way() -> None:
    progress = {"percent": 45.7, "epoch": 9, "totalEpochs": 20, "metrics": {"loss": 0.23}, "step": 900}
    v1 = status_in({"phase": "Running", "progress": progress}, c.V1)
    assert v1 == {
        "state": "Running",
        "progress": "45%",
        "currentEpoch": 9,
        "totalEpochs": 20,
        "metrics": {"loss": 0.23},
        "progressDetails": {"percent": 45.7, "step": 900},
    }


def test_a_v1_status_written_the_guides_way_converts_to_a_progress_object() -> None:
    """A writer that sets only the guide's fields (state, "45%", currentEpoch) still reads sensibly in v1alpha1."""
    guide = {"state": "Completed", "progress": "100%", "currentEpoch": 10, "totalEpochs": 10}
    assert convert_status(guide, SHAPES[c.V1], SHAPES[c.V1ALPHA1]) == {
        "phase": "Succeeded",
        "progress": {"percent": 100.0, "epoch": 10, "totalEpochs": 10},
    }


@pytest.mark.parametrize(("percent", "text"), [(0, "0%"), (45.7, "45%"), (99.99, "99%"), (100, "100%"), (True, None)])
def test_progress_text_only_says_done_when_done(percent: Any, text: str | None) -> None:
    assert progress_text(percent) == text


def test_objects_in_the_internal_shape_are_not_copied_again() -> None:
    body = job({"framework": "jax", "image": "i", "command": ["c"], "gpuPerWorker": 0})
    assert to_internal(body) == body
    assert to_internal(convert(body, V1)) == body


def test_an_unknown_version_is_refused() -> None:
    with pytest.raises(KeyError):
        convert(job({}), f"{c.GROUP}/v2")


def test_api_server_messages_name_fields_as_the_manifest_wrote_them() -> None:
    message = (
        'TrainingJob.ml.example.com "x" is invalid: [spec.gpusPerWorker: Invalid value: -1: spec.gpusPerWorker in '
        "body should be greater than or equal to 0, spec.numWorkers: Invalid value: 0, spec.checkpoint.frequency: "
        "Invalid value: 0]"
    )
    assert field_names_as_written(message, V1ALPHA1_SHAPE) == (
        'TrainingJob.ml.example.com "x" is invalid: [spec.gpuPerWorker: Invalid value: -1: spec.gpuPerWorker in '
        "body should be greater than or equal to 0, spec.workers: Invalid value: 0, spec.checkpoint.interval: "
        "Invalid value: 0]"
    )
    assert field_names_as_written(message, V1_SHAPE) == message
    assert field_names_as_written("frequency of gpusPerWorkerX", V1ALPHA1_SHAPE) == "frequency of gpusPerWorkerX"
