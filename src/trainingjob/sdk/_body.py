"""Build a progress report body and validate it locally, field by field.

Why validate here when the endpoint validates too: the endpoint answers 400 to the *whole* report when one field
is out of range, and a NaN loss or a step counter that overshoots `total_steps` is common in real training. Checking
each field before sending lets the reporter drop only the bad field (and say why) and still deliver the rest.
The rules are the ones of docs/progress-protocol.md. Pure functions: no I/O, no logging.
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections.abc import Mapping
from typing import Any

METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")
MAX_METRICS = 32
MAX_BODY_BYTES = 16 * 1024

# (kind, message): the kind names the field, so the reporter can warn once per kind and not once per step.
Problem = tuple[str, str]


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def as_count(value: object) -> int:
    """A non-negative integer from an int, an integral float, or anything with __index__ (numpy, 0-d tensors)."""
    if isinstance(value, bool | str | bytes):
        raise ValueError(f"not a count: {_short(value)}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except Exception:  # not integral, or a foreign object (e.g. a tensor) that refuses
        try:
            real = float(value)  # type: ignore[arg-type]
        except Exception:
            raise ValueError(f"not a number: {_short(value)}") from None
        if not math.isfinite(real) or not real.is_integer():
            raise ValueError(f"not an integer: {_short(value)}") from None
        number = int(real)
    if number < 0:
        raise ValueError(f"negative: {number}")
    return number


def as_number(value: object) -> int | float:
    """A finite JSON number from an int, a float, or anything float() accepts except strings and booleans."""
    if isinstance(value, bool | str | bytes):
        raise ValueError(f"not a number: {_short(value)}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except Exception:  # not integral, or a foreign object (e.g. a tensor) that refuses
        pass
    try:
        real = float(value)  # type: ignore[arg-type]
    except Exception:
        raise ValueError(f"not a number: {_short(value)}") from None
    if not math.isfinite(real):
        raise ValueError(f"not finite: {real}")
    return real


def clean_metrics(metrics: object, extra: Mapping[str, object]) -> tuple[dict[str, int | float], list[Problem]]:
    """`metrics` merged with `extra` (extra wins), keeping valid names with finite values, at most MAX_METRICS."""
    problems: list[Problem] = []
    merged: dict[object, object] = {}
    if metrics is not None:
        if isinstance(metrics, Mapping):
            merged.update(metrics)
        else:
            problems.append(("metrics", f"metrics: not a mapping: {_short(metrics)}"))
    merged.update(extra)
    clean: dict[str, int | float] = {}
    for name, value in merged.items():
        if not isinstance(name, str) or not METRIC_NAME.match(name):
            problems.append(
                (f"metrics.{_short(name)}", f"metric name {_short(name)}: must match {METRIC_NAME.pattern}")
            )
            continue
        try:
            number = as_number(value)
        except ValueError as error:
            problems.append((f"metrics.{name}", f"metric {name}: {error}"))
            continue
        if len(clean) >= MAX_METRICS:
            problems.append(("metrics.too-many", f"metric {name}: more than {MAX_METRICS} metrics"))
            continue
        clean[name] = number
    return clean, problems


def clean_checkpoint(path: object, epoch: object, step: object) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The `checkpoint` object, or None (with a problem) when the path is unusable; bad counts are left out."""
    problems: list[Problem] = []
    try:
        text = os.fspath(path)  # type: ignore[arg-type]
    except TypeError:
        text = None
    if not isinstance(text, str) or not text:
        return None, [("checkpoint.path", f"checkpoint path: not a non-empty path: {_short(path)}")]
    checkpoint: dict[str, Any] = {}
    for key, value in (("epoch", epoch), ("step", step)):
        if value is None:
            continue
        try:
            checkpoint[key] = as_count(value)
        except ValueError as error:
            problems.append((f"checkpoint.{key}", f"checkpoint {key}: {error}"))
    checkpoint["path"] = text
    return checkpoint, problems


def build_body(
    *,
    worker: int | None,
    epoch: object = None,
    total_epochs: object = None,
    step: object = None,
    total_steps: object = None,
    metrics: object = None,
    extra_metrics: Mapping[str, object] | None = None,
    checkpoint: dict[str, Any] | None = None,
    stopped: bool = False,
) -> tuple[dict[str, Any], list[Problem]]:
    """The JSON body of one report, with every invalid field left out and described in the problems."""
    body: dict[str, Any] = {}
    problems: list[Problem] = []
    if worker is not None:
        body["worker"] = worker
    if stopped:
        body["stopped"] = True
    for key, value in (("epoch", epoch), ("totalEpochs", total_epochs), ("step", step), ("totalSteps", total_steps)):
        if value is None:
            continue
        try:
            body[key] = as_count(value)
        except ValueError as error:
            problems.append((key, f"{key}: {error}"))
    for current, total in (("epoch", "totalEpochs"), ("step", "totalSteps")):
        if current in body and total in body and body[current] > body[total]:
            problems.append((total, f"{total}: {body[total]} is less than {current} {body[current]}"))
            del body[total]
    if metrics is not None or extra_metrics:
        clean, metric_problems = clean_metrics(metrics, extra_metrics or {})
        problems.extend(metric_problems)
        if clean:
            body["metrics"] = clean
    if checkpoint is not None:
        body["checkpoint"] = checkpoint
    return body, problems


def has_content(body: Mapping[str, Any]) -> bool:
    """Whether the body says anything besides who sends it (the protocol wants at least one field)."""
    return any(key != "worker" for key in body)
