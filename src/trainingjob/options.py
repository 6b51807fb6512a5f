"""Settings that carry their own command-line option: one dataclass field says a setting's default, its flag, its
help and how its text reads, and `tj operator` (cli/operator.py) builds its options from the fields. A default is
written once, in the field; the CLI, the settings objects and the checks of deploy/ and the Helm chart read it there.

Readers turn what the command line gives (text, a number, the values of a repeated flag) into the setting's value
and raise ValueError with a message for the user when they cannot.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Option:
    """How a setting reads from the command line. `kind` is the type click converts to (int, float, str, bool);
    `bounds` an inclusive range; `multiple` a repeatable flag (given none, the field's default stays); `read` the
    value click gives -> the setting's value; `text` the field's default -> what the option shows as its default."""

    flags: tuple[str, ...]
    help: str = ""
    metavar: str | None = None
    kind: type = str
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    envvar: str | None = None
    multiple: bool = False
    is_flag: bool = False
    show_default: bool = True
    read: Callable[[Any], Any] | None = None
    text: Callable[[Any], Any] | None = None


def setting(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, **option: Any) -> Any:
    """A dataclass field with its command-line option (see Option for the keywords)."""
    if isinstance(option.get("flags"), str):
        option["flags"] = (option["flags"],)
    return dataclasses.field(default=default, default_factory=factory, metadata={"option": Option(**option)})


def option_of(field: dataclasses.Field) -> Option | None:
    return field.metadata.get("option")


def field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


# Readers -------------------------------------------------------------------------------------------------------


def zero_is_none(value: int) -> int | None:
    """0 means "never"."""
    return value or None


def empty_is_none(value: str | None) -> str | None:
    return value or None


def existing_file(path: str | None) -> str | None:
    """A path that names a file (None stays None)."""
    if path is not None and not Path(path).is_file():
        raise ValueError(f"{path!r} is no file")
    return path


def https_url(url: str | None) -> str | None:
    if url is not None and not url.startswith("https://"):
        raise ValueError(f"{url!r} must be an https:// URL")
    return url


def key_values(values: Iterable[str]) -> dict[str, str]:
    """KEY=VALUE, repeated."""
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


def gpu_types(values: Iterable[str]) -> dict[str, dict[str, str]]:
    """TYPE=KEY=VALUE (repeatable, several labels per type allowed): an LLMModel's gpuType TYPE selects nodes with
    label KEY=VALUE, e.g. H100=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3."""
    types: dict[str, dict[str, str]] = {}
    for item in values:
        gpu_type, sep, label = item.partition("=")
        key, label_sep, value = label.partition("=")
        if not sep or not gpu_type or not label_sep or not key:
            raise ValueError(f"{item!r} is not TYPE=KEY=VALUE")
        types.setdefault(gpu_type, {})[key] = value
    return types


TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def toleration(text: str) -> dict[str, str]:
    """KEY:EFFECT tolerates the taint whatever its value; KEY=VALUE:EFFECT only that value."""
    taint, sep, effect = text.rpartition(":")
    if not sep or effect not in TOLERATION_EFFECTS:
        raise ValueError(f"{text!r} is not KEY[=VALUE]:EFFECT with EFFECT one of {', '.join(TOLERATION_EFFECTS)}")
    key, has_value, value = taint.partition("=")
    if not key:
        raise ValueError(f"{text!r} has no taint key")
    if has_value:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


def tolerations(values: tuple[str, ...]) -> list[dict[str, str]]:
    """`none` alone: no toleration; otherwise exactly the given ones (given none, the default stays)."""
    if values == ("none",):
        return []
    return [toleration(value) for value in values]


def reporters(text: str) -> tuple[int, ...]:
    """Comma-separated worker indexes allowed to report progress, e.g. "0" or "0,1"."""
    try:
        indexes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as error:
        raise ValueError(f"{text!r} is not a comma-separated list of worker indexes") from error
    if not indexes or indexes[0] < 0:
        raise ValueError(f"{text!r} must name at least one worker index, none negative")
    return indexes


def reporters_text(indexes: tuple[int, ...]) -> str:
    return ",".join(str(index) for index in indexes)


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> datetime.timedelta:
    """90d, 12h, 30m or 45s (a bare number is seconds)."""
    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError as error:
        raise ValueError(f"{text!r} is not a duration such as 90d, 12h, 30m or 45s") from error
    if seconds <= 0:
        raise ValueError(f"{text!r} must be positive")
    return datetime.timedelta(seconds=seconds)


def duration_text(value: datetime.timedelta) -> str:
    """The largest unit that divides it: 90d, 12h, 30m, 45s."""
    seconds = int(value.total_seconds())
    for unit, size in sorted(DURATION_UNITS.items(), key=lambda item: -item[1]):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
