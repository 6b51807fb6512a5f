"""The TrainingJob CRD's CEL rules (x-kubernetes-validations) as built by schema.py: immutability, reserved names
and labels, cross-field checks, and bounds that keep the rules within the API server's cost budget.

What the real API server does with them is in tests/integration/test_api_validation.py."""

from __future__ import annotations

import pytest

from tests.unit.schema_support import field, rules_at
from trainingjob.api import constants as c


def test_framework_is_immutable() -> None:
    [immutable] = rules_at(".spec.framework")
    assert immutable["rule"] == "self == oldSelf"
    assert immutable["message"] == "framework is immutable; create a new TrainingJob to change it"


@pytest.mark.parametrize("name", [*c.RESERVED_ENV_NAMES, *c.RESERVED_ENV_PREFIXES])
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


def test_checkpoint_storage_is_a_claim_or_a_size_or_an_object_store() -> None:
    one_of, not_with_store, path_for_store, store_needs_path, one_class, secret = rules_at(".spec.checkpoint.storage")
    assert one_of["rule"] == "(has(self.type) && self.type != 'pvc') || has(self.claimName) != has(self.size)"
    assert "exactly one of claimName" in one_of["message"]
    assert "do not go with type s3 or gcs" in not_with_store["message"]
    assert path_for_store["fieldPath"] == store_needs_path["fieldPath"] == ".path"
    assert "self.path.startsWith('s3://')" in store_needs_path["rule"]
    assert "self.path.startsWith('gs://')" in store_needs_path["rule"]
    assert "!has(self.storageClass)" in not_with_store["rule"]
    assert one_class["rule"].endswith("self.storageClass == self.storageClassName")
    assert secret["rule"] == "!has(self.secretName) || (has(self.type) && self.type != 'pvc')"
    assert secret["fieldPath"] == ".secretName" and "type s3 or gcs only" in secret["message"]
    [positive] = rules_at(".spec.checkpoint.storage.size")
    assert "quantity(string(self)).isGreaterThan(quantity('0'))" in positive["rule"]


def test_enabled_checkpoint_needs_storage() -> None:
    [needs_storage] = rules_at(".spec.checkpoint")
    assert "has(self.storage)" in needs_storage["rule"]
    assert needs_storage["message"] == (
        "checkpoint.enabled needs checkpoint.storage: a claimName or a size, or type s3 or gcs with a path"
    )


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


@pytest.mark.parametrize("reserved", [f"'{c.GROUP}/'", f"'{c.LAB_LABEL_PREFIX}'", f"'{c.LABEL_MANAGED_BY}'"])
def test_operator_labels_are_reserved(reserved: str) -> None:
    [rule] = rules_at(".spec.podLabels")
    assert reserved in rule["rule"]
