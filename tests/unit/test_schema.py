"""The TrainingJob CRD as built by schema.py: documented everywhere, with the enums, defaults and limits the API
promises, and deploy/crd/ generated from it. Its CEL rules are in test_schema_rules.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.schema_support import all_rules, field, root, walk
from trainingjob.api import constants as c
from trainingjob.api import generate, webhook_config
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_builders import node, obj, string

# --- generation ---------------------------------------------------------------------------------------------


def test_deploy_yaml_is_generated_from_the_schema() -> None:
    text = generate.CRD_PATH.read_text()
    assert text.startswith(generate.HEADER), "the header must say the file is generated"
    assert yaml.safe_load(text) == crd_manifest(), "deploy/crd is stale: run `make generate`"
    webhooks = list(yaml.safe_load_all(generate.WEBHOOKS_PATH.read_text()))
    assert webhooks == [webhook_config.mutating_configuration(), webhook_config.validating_configuration()]


def test_check_passes_on_the_committed_file() -> None:
    assert generate.main(["--check"]) == 0


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [(generate.CRD_FILE, "minimum: 1\n", "minimum: 2\n"), (generate.WEBHOOKS_FILE, "Ignore", "Fail")],
)
def test_check_fails_when_a_file_differs(tmp_path: Path, name: str, old: str, new: str) -> None:
    assert generate.main(["--check", "--output", str(tmp_path)]) == 1, "missing files are out of date"
    assert generate.main(["--output", str(tmp_path)]) == 0
    assert generate.main(["--check", "--output", str(tmp_path)]) == 0
    output = tmp_path / name
    output.write_text(output.read_text().replace(old, new, 1))
    assert generate.main(["--check", "--output", str(tmp_path)]) == 1


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
    assert [(v["name"], v["served"], v["storage"]) for v in spec["versions"]] == [
        (c.V1ALPHA1, True, False),
        (c.V1, True, True),
    ]


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
        ("Runtime", "string", ".spec.runtimeRef.name", 1),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]


def test_spec_requires_framework_image_and_command() -> None:
    """Framework always; image and command unless a runtime may give them (a rule the API server reports as a
    missing field, since the schema cannot require a field conditionally)."""
    spec = field("spec")
    assert spec["required"] == ["framework"]
    required = {r["fieldPath"]: r for r in spec["x-kubernetes-validations"] if r.get("reason") == "FieldValueRequired"}
    assert sorted(required) == [".command", ".image"]
    assert all(r["rule"].endswith("|| has(self.runtimeRef)") for r in required.values())


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
        ("spec.checkpoint.storage.storageClass", "string"),
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
    assert set(status["lastFailure"]["properties"]) == {
        "workerId",
        "role",
        "podName",
        "exitCode",
        "reason",
        "message",
        "time",
    }
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
