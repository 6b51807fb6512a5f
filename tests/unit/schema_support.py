"""Reading the generated TrainingJob CRD schema: its root, a field by dotted path, every node below one, and the
CEL rules (x-kubernetes-validations) with where they sit. Shared by test_schema.py and test_schema_rules.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainingjob.api.schema import crd_manifest

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


def rules_at(path: str) -> list[Schema]:
    return [entry for rule_path, entry in all_rules() if rule_path == path]
