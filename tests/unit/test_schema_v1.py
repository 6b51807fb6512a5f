"""v1 as built by schema.py: the guide's names and defaults, every v1alpha1 field under its v1 name (so conversion
has somewhere to put everything), the guide's printer columns and status, and the conversion webhook."""

from __future__ import annotations

from typing import Any

import pytest

from trainingjob.api import constants as c
from trainingjob.api import webhook_config
from trainingjob.api.schema import crd_manifest
from trainingjob.api.versions import SHAPES

Schema = dict[str, Any]
CRD = crd_manifest()  # built once: the tests only read it


def version(name: str) -> Schema:
    return next(v for v in CRD["spec"]["versions"] if v["name"] == name)


def root(name: str) -> Schema:
    return version(name)["schema"]["openAPIV3Schema"]


def at(schema: Schema, path: str) -> Schema:
    for name in path.split("."):
        schema = schema["properties"][name]
    return schema


def property_tree(schema: Schema) -> dict[str, Any]:
    """Property names all the way down (list items and map values included)."""
    tree: dict[str, Any] = {name: property_tree(child) for name, child in schema.get("properties", {}).items()}
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            tree[f"[{key}]"] = property_tree(schema[key])
    return tree


def renamed(tree: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {new if name == old else name: child for name, child in tree.items()}


def test_v1_has_every_v1alpha1_spec_field_under_its_v1_name() -> None:
    alpha, v1 = SHAPES[c.V1ALPHA1], SHAPES[c.V1]
    expected = property_tree(at(root(c.V1ALPHA1), "spec"))
    expected = renamed(renamed(expected, alpha.workers, v1.workers), alpha.gpus, v1.gpus)
    expected["checkpoint"] = renamed(expected["checkpoint"], alpha.checkpoint_interval, v1.checkpoint_interval)
    assert property_tree(at(root(c.V1), "spec")) == expected


def test_v1_status_has_every_v1alpha1_status_field_and_the_guides() -> None:
    alpha, v1 = property_tree(at(root(c.V1ALPHA1), "status")), property_tree(at(root(c.V1), "status"))
    progress = alpha.pop("progress")
    del alpha["phase"]
    guide = {"state", "progress", "currentEpoch", "totalEpochs", "metrics"}
    assert guide <= set(v1)
    assert {name: v1[name] for name in v1 if name not in guide | {"progressDetails"}} == alpha
    assert set(v1["progressDetails"]) | {"epoch", "totalEpochs", "metrics"} == set(progress)
    assert at(root(c.V1), "status.state")["enum"] == list(c.STATES)


@pytest.mark.parametrize(
    ("name", "foreign"),
    [
        (c.V1, ("gpuPerWorker", "spec.workers", "self.workers", "checkpoint.interval")),
        (c.V1ALPHA1, ("gpusPerWorker", "numWorkers", "checkpoint.frequency")),
    ],
)
def test_each_version_names_only_its_own_fields_in_its_texts(name: str, foreign: tuple[str, ...]) -> None:
    """Descriptions, rules and messages speak the version's names, though both are built by the same functions."""
    text = str(root(name))
    assert [word for word in foreign if word in text] == []


@pytest.mark.parametrize(
    ("path", "keyword", "expected"),
    [
        ("spec.numWorkers", "default", 1),
        ("spec.numWorkers", "maximum", c.MAX_WORKERS),
        ("spec.gpusPerWorker", "default", 1),
        ("spec.gpusPerWorker", "maximum", c.MAX_GPUS_PER_WORKER),
        ("spec.framework", "default", "pytorch"),
        ("spec.checkpoint.enabled", "default", True),
        ("spec.checkpoint.frequency", "minimum", 1),
        ("spec.checkpoint.storage.type", "enum", ["pvc", "s3", "gcs"]),
        ("spec.backoffLimit", "default", 3),
    ],
)
def test_v1_defaults_and_limits(path: str, keyword: str, expected: object) -> None:
    assert at(root(c.V1), path)[keyword] == expected


def test_v1_requires_nothing_by_name_but_an_image_by_a_rule_that_says_how_to_get_one() -> None:
    spec = at(root(c.V1), "spec")
    assert "required" not in spec
    (image_rule,) = [r for r in spec["x-kubernetes-validations"] if r.get("fieldPath") == ".image"]
    assert image_rule["rule"] == "has(self.image) || has(self.runtimeRef)"  # or a runtime gives it
    assert "--default-image" in image_rule["message"] and c.DEFAULT_IMAGE_PATTERN in image_rule["message"]
    assert at(root(c.V1ALPHA1), "spec")["required"] == ["framework"]  # image and command by rules, as in v1


def test_immutability_rules_are_in_both_versions() -> None:
    for name in c.SERVED_VERSIONS:
        rules = {r.get("fieldPath"): r for r in at(root(name), "spec")["x-kubernetes-validations"]}
        assert "oldSelf.checkpoint.storage" in rules[".checkpoint.storage"]["rule"]
        assert "cannot change or be removed once set" in rules[".checkpoint.storage"]["message"]
        assert "oldSelf" in rules[".checkpoint.deleteOnCompletion"]["rule"]
        assert at(root(name), "spec.framework")["x-kubernetes-validations"][0]["rule"] == "self == oldSelf"


def test_v1_printer_columns_start_with_the_guides() -> None:
    columns = version(c.V1)["additionalPrinterColumns"]
    default = [(col["name"], col["jsonPath"]) for col in columns if not col.get("priority")]
    assert default == [
        ("State", ".status.state"),
        ("Progress", ".status.progress"),
        ("Epoch", ".status.currentEpoch"),
        ("Workers", ".spec.numWorkers"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    wide = {col["name"]: col["jsonPath"] for col in columns if col.get("priority")}
    assert wide == {
        "Framework": ".spec.framework",
        "Restarts": ".status.restartCount",
        "ETA": ".status.progressDetails.estimatedRemainingSeconds",
        "Runtime": ".spec.runtimeRef.name",
    }


def test_each_version_scales_its_own_workers_field() -> None:
    for name in c.SERVED_VERSIONS:
        assert version(name)["subresources"]["scale"]["specReplicasPath"] == f".spec.{SHAPES[name].workers}"


def test_v1_is_stored_and_every_version_converts_through_the_operator() -> None:
    assert [v["name"] for v in CRD["spec"]["versions"] if v["storage"]] == [c.STORAGE_VERSION]
    assert c.WATCHED_VERSION == c.STORAGE_VERSION, "the operator's own watch must not need its webhook"
    conversion = CRD["spec"]["conversion"]
    assert conversion == webhook_config.conversion(webhook_config.local_endpoint())
    assert conversion["webhook"]["clientConfig"] == {"url": "https://127.0.0.1:9443/convert"}


@pytest.mark.parametrize("name", c.SERVED_VERSIONS)
def test_every_property_of_every_version_is_documented_for_kubectl_explain(name: str) -> None:
    def undocumented(schema: Schema, path: str) -> list[str]:
        missing = []
        children = [(f"{path}.{key}", child) for key, child in schema.get("properties", {}).items()]
        children += [
            (f"{path}[]", schema[key]) for key in ("items", "additionalProperties") if isinstance(schema.get(key), dict)
        ]
        for child_path, child in children:
            if child_path != ".metadata" and not str(child.get("description", "")).strip():
                missing.append(child_path)
            missing += undocumented(child, child_path)
        return missing

    assert root(name)["description"] and undocumented(root(name), "") == []
