"""Per-epoch values of a few named metrics, kept in the job's own status (status.progress.history).

status.progress.metrics holds only the newest report: enough for a person, not for whoever compares runs epoch by
epoch after the fact. A hyperparameter sweep's pruner (docs/sweeps.md) asks "what was this trial's accuracy at epoch
3, and the other trials'?", and the operator that asks may have restarted since epoch 3. So a job that names metrics
in its `ml.example.com/metric-history` annotation gets their values per epoch in its status, where any controller
can read them back.

Bounded, because status is written often and read by every watcher: at most HISTORY_METRICS names and
HISTORY_POINTS epochs each. Past that the series is thinned (every other point of its older half goes), so a long
run keeps its shape from start to end at a coarser grain instead of only its last epochs. Reports that arrive
between two status writes are merged into one (operator/trainingjob/progress.py): each merged report's epoch is kept
as an earlier point (progress/report.py, Report.earlier), so no epoch the endpoint accepted is lost to that merge.
An epoch the worker's SDK never sent (it sends at most one report every 2 s) is missing; readers compare the epochs
they have.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainingjob.api import constants as c

ANNOTATION = c.ANNOTATION_METRIC_HISTORY
HISTORY_METRICS = c.HISTORY_METRICS
HISTORY_POINTS = c.HISTORY_POINTS
METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")  # the progress protocol's metric names

Point = tuple[int, Mapping[str, float]]  # (epoch, the metrics reported at that epoch)


def history_names(annotations: Mapping[str, str] | None) -> tuple[str, ...]:
    """The metric names the job's annotation asks a history of: comma-separated, valid names only, the first
    HISTORY_METRICS of them. Anything else in the annotation is ignored (it is the user's text)."""
    raw = (annotations or {}).get(ANNOTATION) or ""
    names = [name.strip() for name in raw.split(",")]
    valid = [name for name in dict.fromkeys(names) if METRIC_NAME.match(name)]
    return tuple(valid[:HISTORY_METRICS])


def thinned(series: Sequence[dict[str, Any]], bound: int = HISTORY_POINTS) -> list[dict[str, Any]]:
    """At most `bound` points: while over it, every other point of the older half is dropped (the newest half and
    the first point stay), so the series keeps its whole span."""
    points = list(series)
    while len(points) > bound:
        half = len(points) // 2
        older = points[:half]
        points = [older[0], *older[2::2], *points[half:]]
    return points


def recorded(
    previous: Mapping[str, Any] | None, points: Iterable[Point], names: Sequence[str]
) -> dict[str, list[dict[str, Any]]] | None:
    """The history with `points` folded in: for each of `names`, the value at each epoch, sorted by epoch; a newer
    report of an epoch already recorded replaces it (an attempt resumed from a checkpoint repeats epochs). None when
    there is nothing to record."""
    history = {name: list(series) for name, series in (previous or {}).items() if name in names}
    for epoch, metrics in points:
        for name in names:
            value = metrics.get(name)
            if value is None:
                continue
            series = [point for point in history.get(name, []) if point.get("epoch") != epoch]
            series.append({"epoch": epoch, "value": value})
            history[name] = thinned(sorted(series, key=lambda point: point["epoch"]))
    return history or None
