"""Parse and check one progress report (docs/progress-protocol.md), and turn reports into status.progress.

Pure functions: the HTTP layer maps ReportError to a status code, the planner calls `progress_status`.
Whatever a report holds must fit the status schema after merging with the reports before it: a status write the
API server refuses (422) would otherwise hold the job's whole reconcile. So counts stay within the schema's int64
(a larger one is refused here), percent within 0-100 however reports combine, and merged metrics keep the newest
MAX_METRICS names (the schema's maxProperties).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.constants import RECENT_PROGRESS_POINTS
from trainingjob.api.times import format_time, parse_time
from trainingjob.http_bodies import MalformedBody, parse_json
from trainingjob.progress.history import Point, recorded

MAX_BODY_BYTES = 16 * 1024
MAX_METRICS = 32  # status.progress.metrics' maxProperties
# The schema's integers are int64; a count beyond this is no real epoch or step and would make the write fail.
MAX_COUNT = 2**63 - 1
METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$")
# Control characters (C0, DEL, C1) and the bidirectional overrides: no path holds them, and a path is shown as
# is by `kubectl describe`, the CLI and the UI, where an escape sequence repaints (or writes the clipboard of) the
# reader's terminal and an override shows the text in another order than it is.
UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MAX_PATH = 1024
REPORT_DEPTH = 8  # a report nests 2 levels (its metrics, its checkpoint); room for fields it ignores
COUNTS = ("epoch", "totalEpochs", "step", "totalSteps", "worker")
MAX_EARLIER = 32  # epochs kept from merged reports between two status writes (one write every few seconds)


class ReportError(ValueError):
    """A report the endpoint refuses; `status` is the HTTP code to answer with, `retry_after` (seconds) goes into a
    Retry-After header (429, 503)."""

    def __init__(self, status: int, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class Report:
    worker: int | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: dict[str, Any] | None = None
    received: str = ""
    # (epoch, metrics) of the reports merged into this one before a status write, oldest first, at most
    # MAX_EARLIER: what status.progress.history (progress/history.py) records besides this report's own epoch.
    earlier: tuple[Point, ...] = ()
    # The worker stops on request (SIGTERM) and says so; with `checkpoint`, the one it saved on the way out.
    stopped: bool = False

    def points(self) -> tuple[Point, ...]:
        """Every (epoch, metrics) this report stands for, its own last."""
        own = ((self.epoch, self.metrics),) if self.epoch is not None and self.metrics else ()
        return (*self.earlier, *own)


def _count(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ReportError(400, f"{key} must be a non-negative integer of at most {MAX_COUNT}")
    return value


def _metrics(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_METRICS:
        raise ReportError(400, f"metrics must be an object of at most {MAX_METRICS} numbers")
    metrics = {}
    for name, number in value.items():
        if not METRIC_NAME.match(name):
            raise ReportError(400, f"metric name {name[:64]!r} is invalid")
        metrics[name] = _finite(name, number)
    return metrics


def _finite(name: str, number: Any) -> int | float:
    """The metric's value as JSON carries it; an integer too large for a double (10**400) is no finite number."""
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ReportError(400, f"metric {name} must be a finite number")
    try:
        finite = math.isfinite(number)
    except OverflowError:
        finite = False
    if not finite:
        raise ReportError(400, f"metric {name} must be a finite number")
    return number


def _checkpoint(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("path", ""), str):
        raise ReportError(400, "checkpoint must be an object with a string path")
    path = value.get("path", "")
    if len(path) > MAX_PATH:
        raise ReportError(400, f"checkpoint path is longer than {MAX_PATH} characters")
    if UNSHOWABLE.search(path):
        raise ReportError(400, "checkpoint path holds control characters")
    checkpoint: dict[str, Any] = {"path": path}
    for key in ("epoch", "step"):
        number = _count(value, key)
        if number is not None:
            checkpoint[key] = number
    return checkpoint


def parse_report(raw: bytes, now: datetime.datetime) -> Report:
    if len(raw) > MAX_BODY_BYTES:
        raise ReportError(413, f"report is larger than {MAX_BODY_BYTES} bytes")
    try:
        body = parse_json(raw, max_depth=REPORT_DEPTH)
    except MalformedBody as error:
        raise ReportError(400, f"report: {error}") from None
    if not isinstance(body, dict):
        raise ReportError(400, "report must be a JSON object")
    counts = {key: _count(body, key) for key in COUNTS}
    for done, total in (("epoch", "totalEpochs"), ("step", "totalSteps")):
        if counts[done] is not None and counts[total] is not None and counts[done] > counts[total]:
            raise ReportError(400, f"{done} must not exceed {total}")
    report = Report(
        worker=counts["worker"],
        epoch=counts["epoch"],
        total_epochs=counts["totalEpochs"],
        step=counts["step"],
        total_steps=counts["totalSteps"],
        metrics=_metrics(body.get("metrics")),
        checkpoint=_checkpoint(body.get("checkpoint")),
        received=format_time(now),
        stopped=_flag(body, "stopped"),
    )
    if report == Report(worker=report.worker, received=report.received):
        raise ReportError(400, "report carries nothing: give epoch, step, metrics, checkpoint or stopped")
    return report


def _flag(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise ReportError(400, f"{key} must be true or false")
    return value


def merge_reports(older: Report, newer: Report) -> Report:
    """Two reports not yet written: the newer one's fields win, nothing the older one said is lost (a checkpoint-
    only report right after an epoch report must not hide the epoch)."""

    def pick(name: str) -> Any:
        value = getattr(newer, name)
        return getattr(older, name) if value is None else value

    return Report(
        worker=pick("worker"),
        epoch=pick("epoch"),
        total_epochs=pick("total_epochs"),
        step=pick("step"),
        total_steps=pick("total_steps"),
        metrics=newest_metrics(older.metrics, newer.metrics),
        checkpoint=pick("checkpoint"),
        received=newer.received,
        earlier=(*older.points(), *newer.earlier)[-MAX_EARLIER:],
        stopped=older.stopped or newer.stopped,
    )


def newest_metrics(older: Mapping[str, float], newer: Mapping[str, float]) -> dict[str, float]:
    """`newer` over `older`, at most MAX_METRICS names: every name of `newer`, then the most recent of `older`. A
    script that logs more distinct names over its run than the schema holds shows its latest ones."""
    kept = dict(newer)
    for name in reversed(list(older)):
        if len(kept) >= MAX_METRICS:
            break
        kept.setdefault(name, older[name])
    return kept


def percent_done(report: Report) -> float | None:
    """Clamped to 0-100: a merged report may pair a newer step with an older total it has passed."""
    if report.step is not None and report.total_steps:
        return min(round(100.0 * report.step / report.total_steps, 1), 100.0)
    if report.epoch is not None and report.total_epochs:
        return min(round(100.0 * report.epoch / report.total_epochs, 1), 100.0)
    return None


# The pace is measured over the current attempt's last few progress points, never from its start: time spent
# scheduling, blocked, pulling, restoring a checkpoint or at a rendezvous is not training, and counting it made a
# job that waited 30 s before its first report say 23 min for 2.5 min of work.
RECENT_POINTS = RECENT_PROGRESS_POINTS
MIN_POINTS = 3  # two intervals between reports at least; with fewer, the ETA is unknown rather than a guess


def recent_points(
    previous: Mapping[str, Any], percent: float | None, received: str, since: str | None
) -> list[dict[str, Any]]:
    """status.progress.recent: the current attempt's last progress points (percent, time), oldest first.

    A point recorded before `since` (the attempt's start) belongs to an earlier attempt: after a restart, a scale
    or a resume the pace is another one. A percent lower than the last point's means training went back (a
    checkpoint older than its progress): the points start over.
    """
    started = parse_time(since)
    points = [
        dict(point)
        for point in previous.get("recent") or []
        if started is None or ((moment := parse_time(point.get("time"))) is not None and moment >= started)
    ]
    if percent is None or (points and points[-1].get("percent") == percent):
        return points[-RECENT_POINTS:]
    if points and percent < points[-1].get("percent", 0):
        points = []
    points.append({"percent": percent, "time": received})
    return points[-RECENT_POINTS:]


def estimated_remaining(percent: float | None, points: list[dict[str, Any]]) -> int | None:
    """Seconds left at the pace of the recent points; None (unknown) until there are MIN_POINTS of them."""
    if percent == 100:
        return 0
    if percent is None or len(points) < MIN_POINTS:
        return None
    first, last = points[0], points[-1]
    done, begun, now = last["percent"] - first["percent"], parse_time(first["time"]), parse_time(last["time"])
    if done <= 0 or begun is None or now is None or now <= begun:
        return None
    return max(int((now - begun).total_seconds() * (100 - percent) / done), 0)


def progress_status(
    report: Report, previous: Mapping[str, Any], since: str | None, history: Sequence[str] = ()
) -> dict[str, Any]:
    """status.progress: the newest report over the previous one, with an ETA from the attempt's recent pace, and
    the per-epoch values of the `history` metrics (progress/history.py)."""
    progress = {
        key: value for key, value in previous.items() if key not in ("estimatedRemainingSeconds", "attemptStart")
    }
    fields = {
        "epoch": report.epoch,
        "totalEpochs": report.total_epochs,
        "step": report.step,
        "totalSteps": report.total_steps,
    }
    progress.update({key: value for key, value in fields.items() if value is not None})
    if report.metrics:
        progress["metrics"] = newest_metrics(progress.get("metrics", {}), report.metrics)
    percent = percent_done(report)
    if percent is not None:
        progress["percent"] = percent
    progress["lastUpdateTime"] = report.received
    points = recent_points(previous, percent, report.received, since)
    if points:
        progress["recent"] = points
    remaining = estimated_remaining(percent, points)
    if remaining is not None:
        progress["estimatedRemainingSeconds"] = remaining
    series = recorded(previous.get("history"), report.points(), history) if history else None
    if series is not None:
        progress["history"] = series
    return progress


def without_pace(progress: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """status.progress once its attempt's workers are stopped (a restart, a scale, a suspend): what was reached
    stays, the pace and the ETA go, since the next attempt measures its own."""
    if not progress:
        return None
    return {key: value for key, value in progress.items() if key not in ("estimatedRemainingSeconds", "recent")}


def checkpoint_status(report: Report) -> dict[str, Any] | None:
    if report.checkpoint is None:
        return None
    return {**report.checkpoint, "time": report.received}
