"""The TrainingJob CRD as built by schema.py: documented everywhere, with the enums, defaults and limits the API
promises, and deploy/crd/ generated from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainingjob.api import constants as c
from trainingjob.api import generate
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_builders import node, obj, string
from trainingjob.frameworks.registry import RESERVED_ENV_NAMES

Schema = dict[str, Any]


def root() -> Schema:
    return crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def field(path: str) -> Schema:
    """The schema node at a dotted path of properties, e.g. "spec.networking.masterPort"."""
    schema = root()
    for name in path.split("."):
        schema = schema["properties"][name]
    return schema


def walk(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every property, item and map-value node below `schema`, with a readable path."""
    for name, child in schema.get("properties", {}).items():
        yield f"{path}.{name}", child
        yield from walk(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        child = schema.get(key)
        if isinstance(child, dict):
            yield f"{path}{suffix}", child
            yield from walk(child, f"{path}{suffix}")


def all_rules() -> list[tuple[str, Schema]]:
    nodes = [("", root()), *walk(root(), "")]
    return [(path, entry) for path, schema in nodes for entry in schema.get("x-kubernetes-validations", [])]


# --- generation ---------------------------------------------------------------------------------------------


def test_deploy_yaml_is_generated_from_the_schema() -> None:
    text = generate.CRD_PATH.read_text()
    assert text.startswith(generate.HEADER), "the header must say the file is generated"
    assert yaml.safe_load(text) == crd_manifest(), "deploy/crd is stale: run `make generate`"


def test_check_passes_on_the_committed_file() -> None:
    assert generate.main(["--check"]) == 0


def test_check_fails_when_the_file_differs(tmp_path: Path) -> None:
    output = tmp_path / "crd.yaml"
    assert generate.main(["--check", "--output", str(output)]) == 1, "a missing file is out of date"
    assert generate.main(["--output", str(output)]) == 0
    assert generate.main(["--check", "--output", str(output)]) == 0
    output.write_text(output.read_text().replace("minimum: 1\n", "minimum: 2\n", 1))
    assert generate.main(["--check", "--output", str(output)]) == 1


# --- descriptions ---------------------------------------------------------------------------------------------


def test_every_property_has_a_description() -> None:
    # metadata may only restate name/generateName and must not carry a description (the API server refuses it);
    # kubectl explain documents it as ObjectMeta.
    undocumented = [
        path
        for path, schema in walk(root(), "")
        if path != ".metadata" and not str(schema.get("description", "")).strip()
    ]
    assert root()["description"]
    assert undocumented == []


def test_the_builders_refuse_a_missing_description() -> None:
    with pytest.raises(ValueError, match="description"):
        node("string", " ")
    with pytest.raises(ValueError, match="forgotten"):
        obj("An object.", {"documented": string("Yes."), "forgotten": {"type": "string"}})


def test_every_rule_has_a_message() -> None:
    assert all(entry.get("message") for _, entry in all_rules())


# --- API surface ------------------------------------------------------------------------------------------------


def test_names_scope_and_version() -> None:
    spec = crd_manifest()["spec"]
    assert crd_manifest()["metadata"]["name"] == c.CRD_NAME
    assert (spec["group"], spec["scope"]) == (c.GROUP, "Namespaced")
    assert spec["names"]["shortNames"] == ["tj"]
    assert spec["names"]["categories"] == ["all", "ml"]
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [(c.VERSION, True, True)]


def test_scale_and_status_subresources() -> None:
    subresources = crd_manifest()["spec"]["versions"][0]["subresources"]
    assert subresources["status"] == {}
    assert subresources["scale"] == {
        "specReplicasPath": ".spec.workers",
        "statusReplicasPath": ".status.workers",
        "labelSelectorPath": ".status.selector",
    }


def test_printer_columns() -> None:
    columns = crd_manifest()["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(col["name"], col["type"], col["jsonPath"], col.get("priority", 0)) for col in columns] == [
        ("Framework", "string", ".spec.framework", 0),
        ("Workers", "integer", ".spec.workers", 0),
        ("Phase", "string", ".status.phase", 0),
        ("Restarts", "integer", ".status.restartCount", 1),
        ("Progress", "number", ".status.progress.percent", 0),
        ("ETA", "integer", ".status.progress.estimatedRemainingSeconds", 0),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]


def test_spec_requires_framework_image_and_command() -> None:
    assert sorted(field("spec")["required"]) == ["command", "framework", "image"]


@pytest.mark.parametrize(
    ("path", "keyword", "expected"),
    [
        ("spec.framework", "enum", list(c.FRAMEWORKS)),
        ("spec.image", "minLength", 1),
        ("spec.command", "minItems", 1),
        ("spec.workers", "minimum", 1),
        ("spec.workers", "maximum", c.MAX_WORKERS),
        ("spec.workers", "default", 1),
        ("spec.gpuPerWorker", "minimum", 0),
        ("spec.gpuPerWorker", "maximum", c.MAX_GPUS_PER_WORKER),
        ("spec.gpuPerWorker", "default", 0),
        ("spec.restartPolicy", "enum", list(c.RESTART_POLICIES)),
        ("spec.restartPolicy", "default", "OnFailure"),
        ("spec.backoffLimit", "minimum", 0),
        ("spec.backoffLimit", "maximum", 100),
        ("spec.backoffLimit", "default", 3),
        ("spec.checkpointDir", "default", c.DEFAULT_CHECKPOINT_DIR),
        ("spec.checkpointInterval", "minimum", 1),
        ("spec.checkpointInterval", "default", 1),
        ("spec.dataVolume", "required", ["claimName"]),
        ("spec.dataVolume.readOnly", "default", True),
        ("spec.dataVolume.mountPath", "default", c.DEFAULT_DATA_MOUNT_PATH),
        ("spec.networking", "default", {}),
        ("spec.networking.masterPort", "minimum", 1024),
        ("spec.networking.masterPort", "maximum", 65535),
        ("spec.networking.masterPort", "default", c.DEFAULT_MASTER_PORT),
        ("spec.networking.backend", "enum", list(c.BACKENDS)),
        ("spec.hyperparameters", "maxProperties", 64),
        ("spec.env", "x-kubernetes-list-type", "map"),
        ("spec.env", "x-kubernetes-list-map-keys", ["name"]),
        ("spec.scheduling.tolerations.items.operator", "enum", ["Exists", "Equal"]),
        ("spec.scheduling.tolerations.items.effect", "enum", ["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        ("spec.volumes", "x-kubernetes-list-map-keys", ["name"]),
        ("spec.securityContext", "x-kubernetes-preserve-unknown-fields", True),
        # lifecycle policies
        ("spec.suspend", "default", False),
        ("spec.activeDeadlineSeconds", "minimum", 1),
        ("spec.startupTimeoutSeconds", "minimum", 1),
        ("spec.ttlSecondsAfterFinished", "minimum", 0),
        ("spec.cleanPodPolicy", "enum", ["All", "Running", "None"]),
        ("spec.cleanPodPolicy", "default", "Running"),
        ("spec.successPolicy", "enum", ["AllWorkers", "Rank0"]),
        ("spec.successPolicy", "default", "AllWorkers"),
        ("spec.failurePolicy", "default", {}),
        ("spec.failurePolicy.restartStrategy", "enum", ["Gang", "Worker"]),
        ("spec.failurePolicy.restartStrategy", "default", "Gang"),
        ("spec.failurePolicy.rules", "maxItems", 32),
        ("spec.failurePolicy.rules.items", "required", ["exitCodes", "action"]),
        ("spec.failurePolicy.rules.items.exitCodes", "minItems", 1),
        ("spec.failurePolicy.rules.items.exitCodes", "maxItems", 64),
        ("spec.failurePolicy.rules.items.exitCodes.items", "minimum", 0),
        ("spec.failurePolicy.rules.items.exitCodes.items", "maximum", 255),
        ("spec.failurePolicy.rules.items.action", "enum", ["Restart", "Fail", "Ignore"]),
        ("spec.failurePolicy.backoff", "default", {}),
        ("spec.failurePolicy.backoff.baseSeconds", "minimum", 1),
        ("spec.failurePolicy.backoff.baseSeconds", "maximum", 3600),
        ("spec.failurePolicy.backoff.baseSeconds", "default", 10),
        ("spec.failurePolicy.backoff.maxSeconds", "minimum", 1),
        ("spec.failurePolicy.backoff.maxSeconds", "maximum", 86400),
        ("spec.failurePolicy.backoff.maxSeconds", "default", 300),
        ("spec.checkpoint.enabled", "default", False),
        ("spec.checkpoint.dir", "pattern", r"^(/[^/]+)+$"),
        ("spec.checkpoint.interval", "minimum", 1),
        ("spec.checkpoint.keepLast", "minimum", 1),
        ("spec.checkpoint.deleteOnCompletion", "default", False),
        ("spec.checkpoint.storage.claimName", "minLength", 1),
        ("spec.checkpoint.storage.size", "x-kubernetes-int-or-string", True),
        ("spec.checkpoint.storage.accessModes", "default", ["ReadWriteMany"]),
        ("spec.checkpoint.storage.accessModes", "minItems", 1),
        ("spec.checkpoint.storage.accessModes", "x-kubernetes-list-type", "set"),
        (
            "spec.checkpoint.storage.accessModes.items",
            "enum",
            ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
        ),
        ("status.phase", "enum", list(c.PHASES)),
        ("status.conditions", "x-kubernetes-list-map-keys", ["type"]),
        ("status.conditions.items.status", "enum", ["True", "False", "Unknown"]),
        ("status.conditions.items.lastTransitionTime", "format", "date-time"),
        ("status.startTime", "format", "date-time"),
        ("status.completionTime", "format", "date-time"),
        ("status.nextRestartTime", "format", "date-time"),
        ("status.suspendTime", "format", "date-time"),
        ("status.attemptStartTime", "format", "date-time"),
        ("status.lastFailure.time", "format", "date-time"),
        ("status.lastCheckpoint.time", "format", "date-time"),
        ("status.suspendedSeconds", "minimum", 0),
    ],
)
def test_enums_defaults_and_limits(path: str, keyword: str, expected: object) -> None:
    schema = root()
    for name in path.split("."):
        schema = schema["items"] if name == "items" else schema["properties"][name]
    assert schema[keyword] == expected


@pytest.mark.parametrize(
    ("path", "expected_type"),
    [
        ("spec.workers", "integer"),
        ("spec.gpuPerWorker", "integer"),
        ("spec.hyperparameters", "object"),
        ("spec.suspend", "boolean"),
        ("spec.activeDeadlineSeconds", "integer"),
        ("spec.startupTimeoutSeconds", "integer"),
        ("spec.ttlSecondsAfterFinished", "integer"),
        ("spec.failurePolicy", "object"),
        ("spec.failurePolicy.rules", "array"),
        ("spec.checkpoint", "object"),
        ("spec.checkpoint.storage", "object"),
        ("spec.checkpoint.storage.storageClassName", "string"),
        ("spec.checkpoint.storage.accessModes", "array"),
        ("status.workers", "integer"),
        ("status.restartCount", "integer"),
        ("status.disruptionCount", "integer"),
        ("status.attempt", "integer"),
        ("status.observedGeneration", "integer"),
        ("status.selector", "string"),
        ("status.message", "string"),
        ("status.suspendedSeconds", "integer"),
        ("status.lastFailure", "object"),
        ("status.lastFailure.workerId", "integer"),
        ("status.lastFailure.podName", "string"),
        ("status.lastFailure.exitCode", "integer"),
        ("status.lastFailure.reason", "string"),
        ("status.lastFailure.message", "string"),
        ("status.lastCheckpoint", "object"),
        ("status.lastCheckpoint.epoch", "integer"),
        ("status.lastCheckpoint.step", "integer"),
        ("status.lastCheckpoint.path", "string"),
    ],
)
def test_field_types(path: str, expected_type: str) -> None:
    assert field(path)["type"] == expected_type


def test_hyperparameter_values_keep_their_json_type() -> None:
    values = field("spec.hyperparameters")["additionalProperties"]
    assert "type" not in values, "a typed map would turn 0.001 into a string or reject it"
    assert values["x-kubernetes-preserve-unknown-fields"] is True


def test_status_is_typed() -> None:
    status = field("status")
    assert "x-kubernetes-preserve-unknown-fields" not in status
    assert {"phase", "conditions", "workerStatuses", "attempt", "selector", "workers"} <= set(status["properties"])


LIFECYCLE_STATUS = {
    "nextRestartTime": "string",
    "lastFailure": "object",
    "suspendTime": "string",
    "suspendedSeconds": "integer",
    "attemptStartTime": "string",
    "lastCheckpoint": "object",
}


def test_lifecycle_status_fields_are_typed_all_the_way_down() -> None:
    """The operator's status writes are pruned against this: an untyped or missing field would be dropped."""
    status = field("status")["properties"]
    assert {name: status[name]["type"] for name in LIFECYCLE_STATUS} == LIFECYCLE_STATUS
    for name in LIFECYCLE_STATUS:
        for path, schema in [(name, status[name]), *walk(status[name], name)]:
            assert "type" in schema, f"status.{path} is untyped"
            assert "x-kubernetes-preserve-unknown-fields" not in schema, f"status.{path} keeps unknown fields"
    assert set(status["lastFailure"]["properties"]) == {"workerId", "podName", "exitCode", "reason", "message", "time"}
    assert set(status["lastCheckpoint"]["properties"]) == {"epoch", "step", "path", "time"}


def test_conditions_mention_suspended() -> None:
    assert "Suspended" in field("status")["properties"]["conditions"]["items"]["properties"]["type"]["description"]


def test_lifecycle_fields_are_optional() -> None:
    """An existing job without any of them stays valid: nothing new is required in spec."""
    lifecycle = {"suspend", "activeDeadlineSeconds", "startupTimeoutSeconds", "ttlSecondsAfterFinished"}
    lifecycle |= {"cleanPodPolicy", "successPolicy", "failurePolicy", "checkpoint"}
    assert lifecycle <= set(field("spec")["properties"])
    assert not lifecycle & set(field("spec")["required"])
    assert "required" not in field("spec.checkpoint")
    assert "required" not in field("spec.checkpoint.storage")


# --- CEL rules ------------------------------------------------------------------------------------------------


def rules_at(path: str) -> list[Schema]:
    return [entry for rule_path, entry in all_rules() if rule_path == path]


def test_framework_is_immutable() -> None:
    [immutable] = rules_at(".spec.framework")
    assert immutable["rule"] == "self == oldSelf"
    assert immutable["message"] == "framework is immutable; create a new TrainingJob to change it"


@pytest.mark.parametrize("name", [*RESERVED_ENV_NAMES, *c.RESERVED_ENV_PREFIXES])
def test_every_reserved_env_name_is_in_the_rule(name: str) -> None:
    [reserved] = rules_at(".spec.env[].name")
    assert f"'{name}'" in reserved["rule"]
    assert name in reserved["message"] or name.startswith(c.RESERVED_ENV_PREFIXES)


@pytest.mark.parametrize("name", c.RESERVED_VOLUME_NAMES)
def test_every_reserved_volume_name_is_in_the_rule(name: str) -> None:
    [reserved] = rules_at(".spec.volumes[].name")
    assert f"'{name}'" in reserved["rule"]
    assert name in reserved["message"]


@pytest.mark.parametrize("which", ["requests", "limits"])
def test_gpus_are_not_set_through_resources(which: str) -> None:
    [no_gpu] = rules_at(f".spec.resources.{which}")
    assert f"'{c.GPU_RESOURCE}'" in no_gpu["rule"]
    assert "gpuPerWorker" in no_gpu["message"]


def test_name_rules_keep_children_valid() -> None:
    expressions = [entry["rule"] for entry in rules_at("")]
    assert f"self.metadata.name.size() <= {c.MAX_JOB_NAME_LENGTH}" in expressions
    assert any(".matches('^[a-z]" in expression for expression in expressions)


def test_cross_field_rules_on_spec() -> None:
    messages = " ".join(entry["message"] for entry in rules_at(".spec"))
    assert "nccl needs GPUs" in messages
    assert "dataVolume.mountPath must differ from checkpointDir" in messages


def test_backoff_max_is_at_least_base() -> None:
    [ordered] = rules_at(".spec.failurePolicy.backoff")
    assert "self.maxSeconds >= self.baseSeconds" in ordered["rule"]
    assert ordered["fieldPath"] == ".maxSeconds"
    assert "maxSeconds must be at least baseSeconds" in ordered["message"]


def test_checkpoint_storage_is_a_claim_or_a_size() -> None:
    [one_of] = rules_at(".spec.checkpoint.storage")
    assert one_of["rule"] == "has(self.claimName) != has(self.size)"
    assert "exactly one of claimName" in one_of["message"]
    [positive] = rules_at(".spec.checkpoint.storage.size")
    assert "quantity(string(self)).isGreaterThan(quantity('0'))" in positive["rule"]


def test_enabled_checkpoint_needs_storage() -> None:
    [needs_storage] = rules_at(".spec.checkpoint")
    assert "has(self.storage)" in needs_storage["rule"]
    assert needs_storage["message"] == "checkpoint.enabled needs checkpoint.storage: a claimName or a size"


def test_checkpoint_dir_avoids_the_operators_paths() -> None:
    [own] = rules_at(".spec.checkpoint.dir")
    assert f"'{c.SHM_MOUNT_PATH}'" in own["rule"]
    assert f"'{c.CONFIG_MOUNT_PATH}'" in own["rule"]
    spec_rules = {entry.get("fieldPath"): entry for entry in rules_at(".spec")}
    assert "self.checkpoint.dir != self.dataVolume.mountPath" in spec_rules[".checkpoint.dir"]["rule"]
    assert any(
        "checkpoint directory" in entry["message"]
        for entry in rules_at(".spec")
        if entry.get("fieldPath") == ".volumeMounts"
    )


def test_lists_and_maps_read_by_rules_are_bounded() -> None:
    """Without maxItems/maxProperties the API server's cost estimate for the rules exceeds its budget."""
    assert field("spec.env")["maxItems"] == 128
    assert field("spec.env")["items"]["properties"]["name"]["maxLength"]
    assert field("spec.podLabels")["maxProperties"]
    assert field("spec.volumes")["maxItems"]
    assert field("spec.volumeMounts")["maxItems"]


@pytest.mark.parametrize("reserved", [f"'{c.GROUP}/'", f"'{c.LABEL_MANAGED_BY}'"])
def test_operator_labels_are_reserved(reserved: str) -> None:
    [rule] = rules_at(".spec.podLabels")
    assert reserved in rule["rule"]
