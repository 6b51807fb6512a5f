"""What the job commands print: tables, ages, JSON/YAML and `watch` summaries (pure); `tj describe` is
cli/render_describe.py.

Every cell passes `shown`: messages, checkpoint paths and Events carry text from workers and other controllers, and
an escape sequence in one must not repaint or write the clipboard of the reader's terminal (CVE-2021-25743).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from trainingjob.api.readouts import phase_shown, progress_percent, running_workers
from trainingjob.api.status import Phase

NONE = "<none>"
JOB_HEADERS = ("NAME", "FRAMEWORK", "WORKERS", "PHASE", "RESTARTS", "AGE")
OUTPUTS = ("table", "json", "yaml")
FINISHED_PHASES = tuple(phase for phase in Phase if phase.finished)
# C0, DEL and C1 control characters, and the bidirectional overrides (which show text in another order than it is).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(value: Any) -> str:
    """`value` as text a terminal shows as it is: every control character replaced by '?'."""
    return CONTROL.sub("?", str(value))


# Times -------------------------------------------------------------------------------------------------------------


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API server writes it (`2026-01-02T03:04:05Z`), or None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages (apimachinery's HumanDuration): 45s, 3m12s, 25m, 5h3m, 2d4h, 400d, 3y."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: str | None, now: datetime) -> str:
    when = parse_time(timestamp)
    return human_duration((now - when).total_seconds()) if when else NONE


def now_utc() -> datetime:
    return datetime.now(UTC)


# Tables --------------------------------------------------------------------------------------------------------------


def job_headers(all_namespaces: bool) -> list[str]:
    return ["NAMESPACE", *JOB_HEADERS] if all_namespaces else list(JOB_HEADERS)


def job_row(job: dict[str, Any], now: datetime, all_namespaces: bool = False) -> list[str]:
    metadata, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    row = [
        metadata.get("name", NONE),
        spec.get("framework") or NONE,
        str(spec.get("workers", NONE)),
        phase_shown(job, NONE) + ("(simulated)" if status.get("simulated") else ""),  # one token
        str(status.get("restartCount", 0)),
        age(metadata.get("creationTimestamp"), now),
    ]
    return [metadata.get("namespace") or NONE, *row] if all_namespaces else row


def column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]


def format_row(cells: Sequence[str], widths: Sequence[int]) -> str:
    """One line of a kubectl-style table: columns left-aligned, three spaces apart, no trailing blanks."""
    padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=False)]
    return "   ".join([*padded, cells[-1]]).rstrip()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    rows = [[shown(cell) for cell in row] for row in rows]
    widths = column_widths(headers, rows)
    return "\n".join(format_row(cells, widths) for cells in [headers, *rows])


def dump(document: Any, output: str) -> str:
    """`document` as -o json (indented) or -o yaml (block style, keys in their API order)."""
    if output == "json":
        return json.dumps(document, indent=2)
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False).rstrip("\n")


# Status summaries ----------------------------------------------------------------------------------------------------


def condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (job.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return item
    return None


def failure_message(job: dict[str, Any]) -> str:
    """Why a Failed job failed: its Failed condition, else status.message, else the last worker failure."""
    status = job.get("status") or {}
    failed = condition(job, "Failed")
    if failed and failed.get("status") == "True":
        reason, message = failed.get("reason"), failed.get("message")
        return ": ".join(part for part in (reason, message) if part) or "Failed"
    if status.get("message"):
        return status["message"]
    last = status.get("lastFailure")
    return describe_failure(last) if last else "no reason recorded"


def describe_failure(failure: dict[str, Any]) -> str:
    parts = [f"worker {failure.get('workerId', '?')}"]
    if failure.get("podName"):
        parts[0] += f" ({failure['podName']})"
    if failure.get("exitCode") is not None:
        parts.append(f"exit code {failure['exitCode']}")
    if failure.get("reason"):
        parts.append(failure["reason"])
    text = ", ".join(parts)
    if failure.get("message"):
        text += f": {failure['message']}"
    if failure.get("time"):
        text += f" (at {failure['time']})"
    return text


def workers_part(phase: str, running: int, wanted: Any) -> str:
    """`workers 3/4 running`; a finished job wants no workers, so it names only those still running (with
    cleanPodPolicy None nothing stops them), and says when none is."""
    if phase not in FINISHED_PHASES:
        return f"workers {running}/{wanted} running"
    return f"{running} worker{'s' * (running != 1)} still running" if running else "no worker running"


def format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@dataclass(frozen=True)
class ProgressView:
    """What `tj watch` shows: a percentage (None: unknown) and one line of text."""

    percent: float | None
    summary: str


def progress_parts(progress: dict[str, Any], running: bool = False) -> list[str]:
    """status.progress as short phrases: epoch 3/10, step 1200/4000, loss=0.41, ETA 5m20s (or unknown, running)."""
    parts = []
    for done, total, label in (("epoch", "totalEpochs", "epoch"), ("step", "totalSteps", "step")):
        if progress.get(done) is not None:
            parts.append(f"{label} {progress[done]}" + (f"/{progress[total]}" if progress.get(total) else ""))
    metrics = progress.get("metrics") or {}
    if metrics:
        parts.append(" ".join(f"{key}={format_number(value)}" for key, value in sorted(metrics.items())))
    remaining = progress.get("estimatedRemainingSeconds")
    if isinstance(remaining, int | float):
        parts.append(f"ETA {human_duration(remaining)}")
    elif running and progress_percent(progress) not in (None, 100.0):
        parts.append("ETA unknown")
    return parts


def progress_view(job: dict[str, Any]) -> ProgressView:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    phase = phase_shown(job)
    progress = status.get("progress") or {}
    # Only what the workers reported: a job can succeed without reports (or short of 100 %), and a bar filled
    # because of the phase would claim progress nobody measured. "done" says it finished without faking a number.
    percent = progress_percent(progress) if progress else None
    parts = [phase + (" (simulated)" if status.get("simulated") else "")]
    parts.append(workers_part(phase, running_workers(job), spec.get("workers", "?")))
    if percent is not None:
        parts.append(f"{percent:.0f}%")
    elif phase == Phase.SUCCEEDED:
        parts.append("done (no progress reported)")
    parts.extend(progress_parts(progress, running=phase == Phase.RUNNING))
    if phase not in (Phase.RUNNING, *FINISHED_PHASES) and status.get("message"):
        parts.append(status["message"])
    return ProgressView(percent, " · ".join(parts))
