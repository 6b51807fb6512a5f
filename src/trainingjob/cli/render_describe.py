"""`tj describe`: a job's spec and status summary, its conditions, workers and recent Events, as rich renderables
(pure). Every cell passes render.shown, as every other table of the job commands does (see cli/render.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from trainingjob.api import constants as k
from trainingjob.api.readouts import phase_shown, progress_percent, stop_summary
from trainingjob.api.status import Phase, job_phase
from trainingjob.cli.render import NONE, age, describe_failure, progress_parts, shown


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 3, 0, 0), header_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(Text(shown(cell)) for cell in row))
    return table


def _section(title: str, body: RenderableType | str) -> Group:
    content = Text(f"  {shown(body)}") if isinstance(body, str) else _indent(body)
    return Group(Text(f"{title}:", style="bold"), content)


def _indent(table: Table) -> Padding:
    return Padding(table, (0, 0, 0, 2))


def _command_line(spec: dict[str, Any]) -> str:
    words = [*(spec.get("command") or []), *(spec.get("args") or [])]
    return " ".join(json.dumps(word) if not word or any(c.isspace() for c in word) else word for word in words)


def _summary_rows(job: dict[str, Any], now: datetime) -> list[tuple[str, str]]:
    metadata, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    created = metadata.get("creationTimestamp")
    workers = f"{spec.get('workers', '?')}"
    if spec.get("gpuPerWorker"):
        workers += f" x {spec['gpuPerWorker']} {k.GPU_RESOURCE}"
    rows = [
        ("Name", metadata.get("name", "")),
        ("Namespace", metadata.get("namespace", "")),
        ("Created", f"{created} ({age(created, now)} ago)" if created else NONE),
        ("Framework", spec.get("framework") or NONE),
        ("Image", spec.get("image") or NONE),
        ("Command", _command_line(spec) or NONE),
        ("Workers", workers),
    ]
    hyperparameters = spec.get("hyperparameters") or {}
    if hyperparameters:
        rows.append(("Hyperparameters", " ".join(f"{key}={json.dumps(v)}" for key, v in hyperparameters.items())))
    for label, key in (("Model", "model"), ("Dataset", "dataset")):
        if spec.get(key):
            rows.append((label, spec[key]))
    policy = spec.get("restartPolicy") or "OnFailure"
    if spec.get("backoffLimit") is not None:
        policy += f", backoffLimit {spec['backoffLimit']}"
    rows.append(("Restart policy", policy))
    rows.append(("Suspend", "true" if spec.get("suspend") else "false"))
    if metadata.get("deletionTimestamp"):
        rows.append(("Deleting since", metadata["deletionTimestamp"]))
    rows.append(("Phase", phase_shown(job, NONE)))
    if status.get("message"):
        rows.append(("Message", status["message"]))
    for label, key in (("Started", "startTime"), ("Completed", "completionTime"), ("Suspended at", "suspendTime")):
        if status.get(key):
            rows.append((label, status[key]))
    rows.append(("Attempt", str(status.get("attempt", 0))))
    rows.append(("Restarts", str(status.get("restartCount", 0))))
    rows.append(("Disruptions", str(status.get("disruptionCount", 0))))
    if status.get("nextRestartTime"):
        rows.append(("Next restart", status["nextRestartTime"]))
    if status.get("lastFailure"):
        rows.append(("Last failure", describe_failure(status["lastFailure"])))
    gang = status.get("gang") or {}
    if gang:
        where = f"{gang.get('kind', '')} {gang.get('name', '')}: {gang.get('state', '?')}"
        rows.append(("Gang", f"{where} ({gang.get('placed', 0)}/{gang.get('minCount', '?')} placed)"))
    checkpoint = status.get("lastCheckpoint") or {}
    if checkpoint:
        rows.append(("Last checkpoint", checkpoint_summary(checkpoint)))
    if stop := status.get("lastStop"):
        rows.append(("Last stop", stop_summary(stop)))
    progress = status.get("progress") or {}
    if progress:
        percent = progress_percent(progress)
        running = job_phase(job) is Phase.RUNNING
        parts = ([f"{percent:.0f}%"] if percent is not None else []) + progress_parts(progress, running)
        rows.append(("Progress", ", ".join(parts) or NONE))
    return rows


def checkpoint_summary(checkpoint: dict[str, Any]) -> str:
    """status.lastCheckpoint in a few words: only what it records (a checkpoint saved per epoch has no step)."""
    parts = [f"{label} {checkpoint[label]}" for label in ("epoch", "step") if checkpoint.get(label) is not None]
    if checkpoint.get("path"):
        parts.append(str(checkpoint["path"]))
    return " ".join(parts) or NONE


def condition_rows(job: dict[str, Any], now: datetime) -> list[list[str]]:
    return [
        [
            c.get("type", ""),
            c.get("status", ""),
            c.get("reason", ""),
            age(c.get("lastTransitionTime"), now),
            c.get("message", ""),
        ]
        for c in (job.get("status") or {}).get("conditions") or []
    ]


def worker_rows(job: dict[str, Any]) -> list[list[str]]:
    rows = []
    for worker in sorted((job.get("status") or {}).get("workerStatuses") or [], key=lambda w: w.get("workerId", 0)):
        exit_code = worker.get("exitCode")
        rows.append(
            [
                str(worker.get("workerId", "")),
                worker.get("podName", ""),
                worker.get("phase", ""),
                worker.get("nodeName", ""),
                str(worker.get("restartCount", 0)),
                "" if exit_code is None else str(exit_code),
                worker.get("reason", ""),
            ]
        )
    return rows


def event_rows(events: Sequence[dict[str, Any]], now: datetime) -> list[list[str]]:
    rows = []
    for event in events:
        when = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
        count = event.get("count") or 1
        source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
        rows.append(
            [
                event.get("type", ""),
                event.get("reason", ""),
                age(when, now) + (f" (x{count})" if count > 1 else ""),
                source,
                (event.get("message") or "").strip(),
            ]
        )
    return rows


def describe(
    job: dict[str, Any], events: Sequence[dict[str, Any]], now: datetime, extra: Sequence[tuple[str, str]] = ()
) -> Group:
    """`tj describe`: a summary of spec and status (and `extra` rows: the queue), then conditions, workers and
    recent events."""
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    for label, value in [*_summary_rows(job, now), *extra]:
        summary.add_row(Text(f"{label}:"), Text(shown(value)))
    conditions = condition_rows(job, now)
    workers = worker_rows(job)
    event_lines = event_rows(events, now)
    return Group(
        summary,
        _section(
            "Conditions",
            _table(("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"), conditions) if conditions else NONE,
        ),
        _section(
            "Workers",
            _table(("ID", "POD", "PHASE", "NODE", "RESTARTS", "EXIT CODE", "REASON"), workers) if workers else NONE,
        ),
        _section(
            "Events",
            _table(("TYPE", "REASON", "AGE", "FROM", "MESSAGE"), event_lines) if event_lines else NONE,
        ),
    )
