"""The fuzzing strategies' pure part (tests/spec_rules.py, tests/spec_strategies.py): every CEL rule of the schema is
one the strategies know, "as drawn" specs keep the cross-field rules and name only what the World holds, and the
"one value wrong" mode still makes a value wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.spec_rules import (
    GPUS,
    ROLE_FRAMEWORK,
    WORKERS,
    World,
    _matches,
    conform,
    required_unless_runtime,
    unknown_rules,
)
from tests.spec_strategies import WRONG_VALUES, specs
from trainingjob.api import constants as c
from trainingjob.api.schema_checkpoint import URI_SCHEMES
from trainingjob.api.schema_pod import OPERATOR_MOUNTS

VERSIONS = ("v1alpha1", "v1")
WORLD = World(
    runtimes={"pytorch": {c.CLUSTER_RUNTIME_KIND: "rt-torch"}, "mpi": {c.NAMESPACED_RUNTIME_KIND: "rt-mpi"}},
    claims=("data",),
    priority_classes=("high",),
)
FAST = settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rule_of_the_schema_is_one_the_strategies_know(version: str) -> None:
    assert unknown_rules(version) == []


def test_the_fields_a_runtime_may_give_are_read_from_the_rules() -> None:
    assert required_unless_runtime("v1alpha1") == ["image", "command"]
    assert required_unless_runtime("v1") == ["image"]


def broken(spec: dict[str, Any], version: str) -> list[str]:
    """The cross-field rules `spec` breaks, judged here in Python as the CEL rules read."""
    problems = []
    framework = spec.get("framework") or "pytorch"
    if "runtimeRef" in spec:
        kind = spec["runtimeRef"].get("kind") or c.CLUSTER_RUNTIME_KIND
        if spec["runtimeRef"]["name"] != WORLD.runtimes.get(framework, {}).get(kind):
            problems.append("runtimeRef names no runtime of the framework")
    if "runtimeRef" not in spec:
        problems += [f"no {name}" for name in required_unless_runtime(version) if name not in spec]
    problems += [
        f"role {role} with {framework}"
        for role, owner in _matches(version, ROLE_FRAMEWORK)
        if role in (spec.get("roles") or {}) and owner != framework
    ]
    if "elastic" in spec:
        low, high = spec["elastic"]["minWorkers"], spec["elastic"]["maxWorkers"]
        if framework != "pytorch" or not low <= spec.get(WORKERS[version], 1) <= high:
            problems.append("elastic")
    if (spec.get("networking") or {}).get("backend") == "nccl" and not spec.get(GPUS[version]):
        problems.append("nccl without GPUs")
    data = (spec.get("dataVolume") or {}).get("mountPath")
    for mount in spec.get("volumeMounts") or ():
        if mount.get("mountPath") in {*OPERATOR_MOUNTS, data}:
            problems.append(f"mount at {mount.get('mountPath')}")
    if (spec.get("dataVolume") or {}).get("claimName") not in (None, "data"):
        problems.append("dataVolume names another claim")
    if (spec.get("scheduling") or {}).get("priorityClassName") not in (None, "high"):
        problems.append("another PriorityClass")
    for entry in spec.get("env") or ():
        if entry.get("name") in c.RESERVED_ENV_NAMES or entry.get("name", "").startswith(c.RESERVED_ENV_PREFIXES):
            problems.append(f"reserved env {entry.get('name')}")
    for toleration in (spec.get("scheduling") or {}).get("tolerations") or ():
        if not toleration.get("key") and toleration.get("operator") != "Exists":
            problems.append("toleration without key")
    backoff = (spec.get("failurePolicy") or {}).get("backoff") or {}
    if backoff.get("maxSeconds", 3600) < backoff.get("baseSeconds", 10):  # baseSeconds defaults to 10
        problems.append("backoff.maxSeconds below baseSeconds")
    checkpoint = spec.get("checkpoint") or {}
    storage = checkpoint.get("storage")
    if "checkpoint" in spec and checkpoint.get("enabled", version == "v1") and storage is None:  # v1: on by default
        problems.append("checkpoint enabled without storage")
    if storage is not None and storage.get("type", "pvc") == "pvc" and ("claimName" in storage) == ("size" in storage):
        problems.append("pvc storage needs one of claimName and size")
    scheme = URI_SCHEMES.get((storage or {}).get("type"), "")
    if scheme and not storage.get("path", "").startswith(scheme):
        problems.append("object store without its URI")
    return problems


@pytest.mark.parametrize("version", VERSIONS)
def test_specs_as_drawn_keep_the_cross_field_rules_and_conform_changes_them_no_more(version: str) -> None:
    @FAST
    @given(specs(version, WORLD))
    def check(drawn: tuple[dict[str, Any], str]) -> None:
        spec, how = drawn
        if how == "as drawn":
            assert broken(spec, version) == [], spec
            assert conform(spec, version, WORLD, {}) == spec

    check()


def test_one_value_wrong_still_draws_a_wrong_value() -> None:
    seen = []

    @FAST
    @given(specs("v1", WORLD).filter(lambda drawn: drawn[1].startswith("spec.") and " = " in drawn[1]))
    def check(drawn: tuple[dict[str, Any], str]) -> None:
        _, how = drawn
        seen.append(how)
        assert any(how.endswith(f" = {wrong!r:.40}") for wrong in WRONG_VALUES), how

    check()
    assert seen


def test_what_belongs_to_another_framework_goes_and_counts_are_put_in_order() -> None:
    spec = {
        "framework": "mpi",
        "roles": {"chief": {}, "launcher": {}},
        "elastic": {"minWorkers": 3, "maxWorkers": 1},
        "image": "x",
        "runtimeRef": {"name": "unknown"},
    }
    # the World has an mpi runtime only as a TrainingRuntime; the reference (a ClusterTrainingRuntime) goes
    assert conform(spec, "v1", WORLD, {"image": "y"}) == {"framework": "mpi", "roles": {"launcher": {}}, "image": "x"}
    namespaced = {"framework": "mpi", "runtimeRef": {"kind": c.NAMESPACED_RUNTIME_KIND, "name": "other"}}
    assert conform(namespaced, "v1", WORLD, {"image": "y"})["runtimeRef"]["name"] == "rt-mpi"
    torch = conform({"elastic": {"minWorkers": 3, "maxWorkers": 1}, "numWorkers": 0}, "v1", WORLD, {"image": "y"})
    assert torch == {"elastic": {"minWorkers": 1, "maxWorkers": 3}, "numWorkers": 1, "image": "y"}


def test_without_a_runtime_of_its_kind_the_reference_goes_and_the_image_is_given() -> None:
    drawn = {"framework": "jax", "runtimeRef": {"name": "r"}}
    spec = conform(drawn, "v1alpha1", WORLD, {"image": "i", "command": ["c"]})
    assert spec == {"framework": "jax", "image": "i", "command": ["c"]}


def test_with_nothing_in_the_world_references_go() -> None:
    drawn = {"dataVolume": {"claimName": "x"}, "scheduling": {"priorityClassName": "p"}}
    spec = conform(drawn, "v1", World(), {"image": "i"})
    assert spec == {"scheduling": {}, "image": "i"}
