"""Hyperparameters from the JSON file the operator mounts (TRAININGJOB_HYPERPARAMETERS_FILE), over a script's
defaults.

Why here: every example script needs the same reading (a missing file means the defaults, values converted to the
type of their default, unknown keys ignored), and four copies of it had started to drift apart. Standard library
only, like the rest of the SDK.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("trainingjob.sdk")

HYPERPARAMETERS_FILE_ENV = "TRAININGJOB_HYPERPARAMETERS_FILE"


class ConfigError(ValueError):
    """Hyperparameters (or launcher variables) that cannot work: restarting won't help, so a script exits with its
    configuration-error code, which a failurePolicy rule can turn into a failed job."""


def hyperparameters_file(env: Mapping[str, str] | None = None) -> str | None:
    """TRAININGJOB_HYPERPARAMETERS_FILE (None outside a TrainingJob)."""
    env = os.environ if env is None else env
    return env.get(HYPERPARAMETERS_FILE_ENV) or None


def parse_hyperparameters(
    path: str | os.PathLike[str] | None,
    defaults: Mapping[str, Any],
    positive: Iterable[str] = (),
    check: Callable[[Mapping[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """`defaults`, overridden by the JSON object in `path`.

    Each value is converted to the type of its default (64.0 → 64, "true" → True); one that cannot be is a
    ConfigError. Keys without a default are ignored with a warning. No path, or no file there: the defaults.
    The keys in `positive` must be > 0; `check` may raise ConfigError for what must hold between values.
    """
    params = dict(defaults)
    if not path:
        return params
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        log.warning("hyperparameters file %s does not exist; using the defaults", path)
        return params
    try:
        given = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(given, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(given).__name__}")
    for key, value in given.items():
        if key not in defaults:
            log.warning("ignoring unknown hyperparameter %s", key)
            continue
        params[key] = coerce(key, value, defaults[key])
    for key in positive:
        if key in params and params[key] <= 0:
            raise ConfigError(f"hyperparameter {key} must be positive, got {params[key]}")
    if check is not None:
        check(params)
    return params


def coerce(key: str, value: Any, default: Any) -> Any:
    """`value` as the type of `default`, or a ConfigError that names the key."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
    elif isinstance(default, float):
        number = value
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number):
            return float(number)
    elif isinstance(default, str) and isinstance(value, str):
        return value
    raise ConfigError(f"hyperparameter {key} must be a {type(default).__name__}, got {value!r}")
