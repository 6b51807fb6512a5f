"""What `tj get`, `tj describe` and `tj watch` show of a job's place in Kueue's queues.

The position is read when shown, from Kueue's visibility API (queueing/visibility.py says why the operator does not
write it into status): one request per LocalQueue listed. Where it cannot be read (Kueue absent, no permission),
the job is still listed, with `?` and the reason in `describe`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import aiohttp

from trainingjob.cli.render import NONE, human_duration, job_headers, job_row
from trainingjob.queueing.visibility import (
    PositionReader,
    QueuePlace,
    position_text,
    queue_of,
    short_position,
    waited_seconds,
)

QUEUE_HEADERS = ("QUEUE", "POSITION", "QUEUED")
TIMEOUT = aiohttp.ClientTimeout(sock_connect=10, sock_read=30)
Key = tuple[str, str]


def queued_listing(jobs: Iterable[Mapping[str, Any]]) -> bool:
    """Any job of the listing goes through Kueue: the table gets the queue columns (else it stays as it was)."""
    return any(queue_of(job) for job in jobs)


def before_age(cells: Sequence[str], extra: Sequence[str]) -> list[str]:
    """`extra` inserted before the last column (AGE stays last, as in every kubectl table)."""
    return [*cells[:-1], *extra, cells[-1]]


def key_of(job: Mapping[str, Any]) -> Key:
    metadata = job.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def queue_cells(job: Mapping[str, Any], place: QueuePlace | None, now: datetime) -> list[str]:
    """QUEUE (the LocalQueue), POSITION (in the ClusterQueue, while waiting; else -), QUEUED (time waited in all).
    Never an empty cell: scripts split these tables on blanks."""
    queue = queue_of(job)
    if not queue:
        return [NONE, "-", "-"]
    waited = waited_seconds(queue, now)
    return [
        str(queue.get("name") or NONE),
        (short_position(place) if place else "") or "-",
        human_duration(waited) if waited else "0s",
    ]


def describe_rows(job: Mapping[str, Any], place: QueuePlace | None, now: datetime) -> list[tuple[str, str]]:
    """Rows for `tj describe`: the queues, the position while waiting, the time waited and Kueue's reason."""
    queue = queue_of(job)
    if not queue:
        return []
    cluster = (place.cluster_queue if place else "") or queue.get("clusterQueue") or "?"
    rows = [("Queue", f"LocalQueue {queue.get('name', '?')} of ClusterQueue {cluster}")]
    text = position_text(place) if place else ""
    if text:
        rows.append(("Position", text))
    waited = waited_seconds(queue, now) or 0
    since = f" (this wait since {queue['queuedSince']})" if queue.get("queuedSince") else ""
    rows.append(("Queued for", f"{human_duration(waited)} in all{since}"))
    if queue.get("reason"):
        rows.append(("Queue state", f"{queue['reason']}: {queue.get('message') or ''}".rstrip(": ")))
    if queue.get("admittedWorkers") is not None:  # an elastic job Kueue admitted partially
        asked = (job.get("spec") or {}).get("workers", "?")
        rows.append(("Admitted", f"{queue['admittedWorkers']} of {asked} workers (Kueue's partial admission)"))
    return rows


async def read_places(api: Any, jobs: Iterable[Mapping[str, Any]], now: datetime) -> dict[Key, QueuePlace]:
    """The place of every waiting job among `jobs` (none read when none waits)."""
    return await PositionReader(api, TIMEOUT).places(list(jobs), now)


def table_headers(all_namespaces: bool, queued: bool) -> list[str]:
    headers = job_headers(all_namespaces)
    return before_age(headers, QUEUE_HEADERS) if queued else headers


def table_row(
    job: Mapping[str, Any], now: datetime, all_namespaces: bool, queued: bool, places: Mapping[Key, QueuePlace]
) -> list[str]:
    """The job's `tj get` row; with the queue columns when the listing has any Kueue job (POSITION read now)."""
    row = job_row(dict(job), now, all_namespaces)
    return before_age(row, queue_cells(job, places.get(key_of(job)), now)) if queued else row
