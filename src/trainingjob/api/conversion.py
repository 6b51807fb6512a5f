"""Pure conversion of TrainingJob objects between the served versions, and into the shape the operator reads.

The conversion webhook (webhooks/conversion.py), the operator's caches (to_internal), the CLI and the storage
migration all call these functions, so a job means the same thing whichever version it is written or read in.

Spec: fields are copied, except those api/versions.py lists with another name or default in some version. A field
whose default differs between versions is written explicitly when it is absent, so that it keeps the meaning it
had where it came from (a v1alpha1 job without gpuPerWorker has 0 GPUs, and v1 would default a missing
gpusPerWorker to 1). The API server defaults an object before it converts it, so for the objects it sends,
v1alpha1 -> v1 -> v1alpha1 gives back exactly what went in.

Status: v1 speaks the guide's words. `state` is derived from the phase (Succeeded is Completed; Pending with
worker pods already created is Initializing; Restarting stays Restarting), `progress` is the percent as text
("45%"), `currentEpoch`, `totalEpochs` and `metrics` are the progress report's, and the rest of v1alpha1's
progress object is `progressDetails`. Every v1alpha1 status converts to v1 and back unchanged; a v1 status
converts to v1alpha1 and back unchanged when its `state` and `progress` text are the derived ones (which is what
the operator writes).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.status import Phase
from trainingjob.api.versions import SHAPES, VersionShape, shape_of

Body = dict[str, Any]

# v1alpha1's progress keys that v1 shows at the top of status, by their v1 names.
PROMOTED_PROGRESS = (("epoch", "currentEpoch"), ("totalEpochs", "totalEpochs"), ("metrics", "metrics"))
PHASE_TO_STATE = {Phase.SUCCEEDED.value: "Completed"}
STATE_TO_PHASE = {"Completed": Phase.SUCCEEDED.value, "Initializing": Phase.PENDING.value}
_PERCENT_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*%?\s*$")


# --- spec ------------------------------------------------------------------------------------------------------


def _rename(data: dict[str, Any], old: str, new: str) -> None:
    if old != new and old in data:
        data[new] = data.pop(old)


def _copied(value: Any, owned: bool) -> Any:
    """`value` itself when the caller gives it away (`owned`), else a deep copy the caller's object never shares."""
    return value if owned else copy.deepcopy(value)


def convert_spec(spec: Mapping[str, Any], source: VersionShape, target: VersionShape, owned: bool = False) -> Body:
    """spec in `target`'s names, meaning exactly what it meant in `source` (`owned`: see convert)."""
    out = dict(_copied(spec, owned))
    if source == target:
        return out
    _rename(out, source.workers, target.workers)
    gpus = out.pop(source.gpus, source.default_gpus)
    out[target.gpus] = gpus
    if "framework" not in out and source.default_framework:
        out["framework"] = source.default_framework
    checkpoint = out.get("checkpoint")
    if isinstance(checkpoint, dict):
        _rename(checkpoint, source.checkpoint_interval, target.checkpoint_interval)
        if source.default_checkpoint_enabled != target.default_checkpoint_enabled:
            checkpoint.setdefault("enabled", source.default_checkpoint_enabled)
    return out


# --- status ----------------------------------------------------------------------------------------------------


def state_of(phase: str, workers: Any) -> str:
    """v1's state for a v1alpha1 phase: the guide has Initializing where pods exist but do not all run yet."""
    if phase == Phase.PENDING and isinstance(workers, int) and workers > 0:
        return "Initializing"
    return PHASE_TO_STATE.get(phase, phase)


def progress_text(percent: Any) -> str | None:
    """45.7 -> "45%": floored, so a job shows 100% only when it is done."""
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not math.isfinite(percent):
        return None
    return f"{math.floor(percent)}%"


def parse_progress_text(text: Any) -> float | None:
    match = _PERCENT_TEXT.match(text) if isinstance(text, str) else None
    return min(float(match.group(1)), 100.0) if match else None


def _status_to_v1(out: Body) -> Body:
    phase = out.pop("phase", None)
    if phase is not None:
        out["state"] = state_of(phase, out.get("workers"))
    progress = out.pop("progress", None)
    if isinstance(progress, dict):
        details = dict(progress)
        for inner, outer in PROMOTED_PROGRESS:
            if inner in details:
                out[outer] = details.pop(inner)
        out["progressDetails"] = details
        text = progress_text(details.get("percent"))
        if text is not None:
            out["progress"] = text
    elif progress is not None:
        out["progress"] = progress
    return out


def _status_from_v1(out: Body) -> Body:
    state = out.pop("state", None)
    if state is not None:
        out["phase"] = STATE_TO_PHASE.get(state, state)
    text = out.pop("progress", None)
    details = out.pop("progressDetails", None)
    promoted = {inner: out.pop(outer) for inner, outer in PROMOTED_PROGRESS if outer in out}
    if details is not None or promoted or text is not None:
        progress = dict(details) if isinstance(details, Mapping) else {}
        progress.update(promoted)
        percent = parse_progress_text(text)
        if "percent" not in progress and percent is not None:
            progress["percent"] = percent
        out["progress"] = progress
    return out


def _same(out: Body) -> Body:
    return out


# Each version's status to and from the internal (v1alpha1) shape, rewriting a status the caller no longer needs
# in place; a new version adds one pair.
_STATUS_TO_INTERNAL: dict[str, Callable[[Body], Body]] = {c.V1ALPHA1: _same, c.V1: _status_from_v1}
_STATUS_FROM_INTERNAL: dict[str, Callable[[Body], Body]] = {c.V1ALPHA1: _same, c.V1: _status_to_v1}
assert set(_STATUS_TO_INTERNAL) == set(SHAPES) == set(_STATUS_FROM_INTERNAL)


def convert_status(status: Mapping[str, Any], source: VersionShape, target: VersionShape, owned: bool = False) -> Body:
    """status in `target`'s words (`owned`: see convert); copied once, then rewritten in place."""
    out = dict(_copied(status, owned))
    if source == target:
        return out
    return _STATUS_FROM_INTERNAL[target.version](_STATUS_TO_INTERNAL[source.version](out))


# --- whole objects ---------------------------------------------------------------------------------------------


def convert(obj: Mapping[str, Any], api_version: str, owned: bool = False) -> Body:
    """`obj` (any served version; no apiVersion means the internal one) as `api_version`. metadata is untouched,
    as the API server requires of a conversion webhook. The result shares nothing with `obj`, unless the caller
    gives `obj` away (`owned`: a body it just parsed): then its parts are reused and may be rewritten, which spares
    the deep copies that are most of the work (a 3 KB job with its managedFields: 114-143 us copying, 14-15 us not;
    the webhook converts every write of a job for the API server)."""
    source = shape_of(obj.get("apiVersion") or f"{c.GROUP}/{c.INTERNAL_VERSION}")
    target = shape_of(api_version)
    out: Body = {key: _copied(value, owned) for key, value in obj.items() if key not in ("spec", "status")}
    out["apiVersion"] = target.api_version
    if obj.get("spec") is not None:
        out["spec"] = convert_spec(obj["spec"], source, target, owned)
    if obj.get("status") is not None:
        out["status"] = convert_status(obj["status"], source, target, owned)
    return out


def to_internal(obj: Mapping[str, Any]) -> Body:
    """The object in the shape api/types.py reads; a body already in that shape is returned as it is."""
    if (obj.get("apiVersion") or "").rpartition("/")[2] in ("", c.INTERNAL_VERSION):
        return dict(obj)
    return convert(obj, f"{c.GROUP}/{c.INTERNAL_VERSION}")


def status_in(status: Mapping[str, Any], version: str) -> Body:
    """An internal-shaped status as `version` stores it (what the operator writes through the watched version)."""
    return convert_status(status, SHAPES[c.INTERNAL_VERSION], SHAPES[version])
