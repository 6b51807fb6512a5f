"""Hypothesis strategies for whole TrainingJob specs, read from the CRD's own OpenAPI schema (the single source in
src/trainingjob/api/), so every field the schema has is drawn, valid values mostly, and then sometimes one value
made wrong (a wrong type, out of range, too long, an unknown field).

Numbers stay small (a spec drawn with 900 workers would make 900 pods, not a better test): integers are drawn
within the schema's bounds but at most SMALL above the minimum; lists and maps hold at most two entries; strings
without a pattern are short printable ASCII. What the schema cannot say (CEL rules across fields, the operator's
own checks) is what the drawn specs find out: tests/spec_rules.py makes "as drawn" specs satisfy the CEL rules and
name what exists (runtimes, claims, PriorityClasses), so most of them reach the operator; the wrong ones are those
made wrong on purpose.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from tests.spec_rules import World, conform, required_unless_runtime, spec_schema

Schema = Mapping[str, Any]
SMALL = 4
TEXT = string.ascii_letters + string.digits + "-_./:= "
# Values that break a field of any type: each is wrong for most types, and one of them is wrong for every one.
NOTHING = World()  # no runtime, claim or PriorityClass to name: drawn references are dropped
WRONG_VALUES = (-1, 10**12, "not-a-number", "x" * 300, {"unexpected": 1}, [1, "two"], True, "", None)


def value_of(schema: Schema, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values the schema allows by its types, enums, bounds and patterns (CEL rules aside)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        # A quantity's strings from the schema's own pattern (its decimal exponents were once refused by the API
        # server only when the operator created the pods); other int-or-strings from a few of each kind.
        pattern = schema.get("pattern")
        strings = st.from_regex(pattern, fullmatch=True) if pattern else st.sampled_from(["1", "50%", "1Gi", "500m"])
        return st.integers(0, SMALL) | strings
    if schema.get("x-kubernetes-preserve-unknown-fields") and schema.get("maxProperties") == 0:
        return scalars()  # a value the schema keeps untyped but allows no object or list in (a hyperparameter)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return object_of(schema, depth)
    if kind == "array":
        return array_of(schema, depth)
    if kind == "integer":
        low = schema.get("minimum", 0)
        return st.integers(low, min(schema.get("maximum", low + SMALL), low + SMALL))
    if kind == "number":
        return st.floats(0, 10, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        return text_of(schema)
    return small_json()


def text_of(schema: Schema) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), min(schema.get("maxLength", 24), 24)
    if "pattern" in schema:
        alphabet = st.characters(codec="ascii", exclude_categories=("Cc",))
        fitting = st.from_regex(schema["pattern"], fullmatch=True, alphabet=alphabet)
        return fitting.filter(lambda text: low <= len(text) <= schema.get("maxLength", 63))
    return st.text(TEXT, min_size=low, max_size=max(low, high))


def object_of(schema: Schema, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties") or {}
    if not properties:
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return st.dictionaries(
                st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True), value_of(extra, depth + 1), max_size=2
            )
        return small_json() if schema.get("x-kubernetes-preserve-unknown-fields") else st.just({})
    required = set(schema.get("required") or ())
    if depth > 4:  # deep optional structure adds little; what is required still is drawn
        properties = {name: child for name, child in properties.items() if name in required}
    return st.fixed_dictionaries(
        {name: value_of(child, depth + 1) for name, child in properties.items() if name in required},
        optional={name: value_of(child, depth + 1) for name, child in properties.items() if name not in required},
    )


def array_of(schema: Schema, depth: int) -> st.SearchStrategy[list[Any]]:
    items = schema.get("items") or {}
    low = schema.get("minItems", 0)
    high = max(low, min(schema.get("maxItems", 2), 2))
    keys = schema.get("x-kubernetes-list-map-keys")
    if keys:  # a list-map: its keys unique, as the API server demands
        return st.lists(
            value_of(items, depth + 1),
            min_size=low,
            max_size=high,
            unique_by=lambda e: tuple(str(e.get(k)) for k in keys),
        )
    if schema.get("x-kubernetes-list-type") == "set":
        return st.lists(value_of(items, depth + 1), min_size=low, max_size=high, unique=True)
    return st.lists(value_of(items, depth + 1), min_size=low, max_size=high)


def scalars() -> st.SearchStrategy[Any]:
    return st.integers(-3, 3) | st.text(TEXT, max_size=8) | st.booleans()


def small_json() -> st.SearchStrategy[Any]:
    return st.dictionaries(st.text(string.ascii_lowercase, min_size=1, max_size=6), scalars(), max_size=2)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a drawn spec a value sits (dictionary keys and list indexes), outermost first."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


@st.composite
def specs(
    draw: st.DrawFn, version: str, world: World = NOTHING, framework: str | None = None
) -> tuple[dict[str, Any], str]:
    """A whole spec and what was done to it: "as drawn" (valid by type and by the cross-field rules, naming what
    `world` holds), or the one value made wrong (path and value), or an unknown field added. `framework`: this one
    (an update of a job, whose framework is immutable), else each as often."""
    schema = spec_schema(version)
    required = required_unless_runtime(version)
    defaults = draw(st.fixed_dictionaries({name: value_of(schema["properties"][name]) for name in required}))
    spec = draw(value_of(schema))
    # Every framework as often, or left to its default if it has one. sampled_from leans to the first option (what
    # it shrinks to) in as many examples as a run has (40): a wide integer modulo the count does not.
    choice = schema["properties"]["framework"]
    options = [framework] if framework else [*choice["enum"], *([None] if "default" in choice else [])]
    if (chosen := options[draw(st.integers(0, 2**32)) % len(options)]) is None:
        spec.pop("framework", None)
    else:
        spec["framework"] = chosen
    if "managedBy" in spec and draw(st.randoms(use_true_random=False)).random() < 0.75:
        del spec["managedBy"]  # a job left to another controller tells little: about 1 in 8 keeps the field
    spec = conform(spec, version, world, defaults)
    # Evenly: sampled_from (and a wide integer's boundaries) lean to the first option, "as drawn".
    how = draw(st.randoms(use_true_random=False)).choice(("as drawn", "as drawn", "one value wrong", "unknown field"))
    if how == "one value wrong" and (places := paths(spec)):
        place = draw(st.sampled_from(places))
        wrong = draw(st.sampled_from(WRONG_VALUES))
        container = spec
        for step in place[:-1]:
            container = container[step]
        container[place[-1]] = wrong
        return spec, f"spec.{'.'.join(map(str, place))} = {wrong!r:.40}"
    if how == "unknown field":
        spec["notAField"] = draw(st.integers(0, 3))
        return spec, "spec.notAField added"
    return spec, how
