"""Small builders for OpenAPI v3 schema nodes, so the TrainingJob schema reads like a table of fields.

Every builder takes the description as a required positional argument: `kubectl explain` shows it, and a field
without one is a field users have to guess about. `obj()` also refuses properties that lack a description, so a
raw dict slipped in by hand cannot forget it either.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# Keyword arguments that are not plain snake_case spellings of an OpenAPI keyword.
_EXTENSIONS = {
    "list_type": "x-kubernetes-list-type",
    "list_map_keys": "x-kubernetes-list-map-keys",
    "preserve_unknown": "x-kubernetes-preserve-unknown-fields",
    "int_or_string": "x-kubernetes-int-or-string",
    "rules": "x-kubernetes-validations",
}


def _keyword(name: str) -> str:
    if name in _EXTENSIONS:
        return _EXTENSIONS[name]
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def node(type_: str | None, description: str, **keywords: Any) -> Schema:
    """A schema node of `type_` (None for untyped nodes); keywords are OpenAPI keywords in snake_case."""
    if not description or not description.strip():
        raise ValueError("every schema node needs a description")
    schema: Schema = {"description": description}
    if type_ is not None:
        schema["type"] = type_
    schema.update({_keyword(name): value for name, value in keywords.items() if value is not None})
    return schema


def string(description: str, **keywords: Any) -> Schema:
    return node("string", description, **keywords)


def integer(description: str, **keywords: Any) -> Schema:
    return node("integer", description, **keywords)


def boolean(description: str, **keywords: Any) -> Schema:
    return node("boolean", description, **keywords)


def array(description: str, items: Schema, **keywords: Any) -> Schema:
    return node("array", description, items=items, **keywords)


def obj(description: str, properties: dict[str, Schema] | None = None, **keywords: Any) -> Schema:
    """An object node; each of its `properties` must carry a description."""
    undocumented = [name for name, schema in (properties or {}).items() if not schema.get("description")]
    if undocumented:
        raise ValueError(f"properties without a description: {', '.join(undocumented)}")
    return node("object", description, properties=properties, **keywords)


def string_map(description: str, values: Schema, **keywords: Any) -> Schema:
    """An object used as a map from string keys to `values`."""
    return node("object", description, additional_properties=values, **keywords)


def rule(
    expression: str,
    message: str,
    *,
    message_expression: str | None = None,
    field_path: str | None = None,
    reason: str | None = None,
) -> Schema:
    """One x-kubernetes-validations entry (a CEL rule). `message` is required: a bare rule reports only the
    expression, which tells a user nothing; `message_expression` can add the offending value."""
    entry: Schema = {"rule": expression, "message": message}
    optional = {"messageExpression": message_expression, "fieldPath": field_path, "reason": reason}
    entry.update({key: value for key, value in optional.items() if value is not None})
    return entry


def cel_list(values: tuple[str, ...] | list[str]) -> str:
    """A CEL list literal of string constants."""
    return "[" + ", ".join(cel_string(value) for value in values) + "]"


def cel_string(value: str) -> str:
    """A CEL single-quoted string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
