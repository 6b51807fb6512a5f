"""Where a Queued TrainingJob stands in Kueue's queues, read on demand from Kueue's visibility API.

The operator does not record the position in the job's status, on purpose: a position changes for every job behind
one that is admitted, created, deleted or re-prioritised, so recording it would cost one status write per waiting
job on each of those changes (N writes per admission, about N²/2 to drain a queue of N jobs), all of them for a
number nobody may be looking at. Kueue itself dropped the positions it once wrote into ClusterQueue status for the
same reason and serves them from `visibility.kueue.x-k8s.io` (an aggregated API computed from its in-memory
queues) instead. So `tj` and the UI ask that API when they show a job: one request per LocalQueue shown, whatever
the number of jobs in it, with the reader's own credentials (Kueue's `kueue-batch-user-role` grants it).

Pure parts (paths, picking a job's entry, the words shown) plus one async reader over a kubernetes_asyncio client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.status import Phase, job_phase
from trainingjob.api.times import parse_time
from trainingjob.kube.status import api_message, raise_for_status

GROUP = "visibility.kueue.x-k8s.io"
# v0.17.0 serves both; v1beta2 first, v1beta1 for a Kueue that serves only the older one.
VERSIONS = ("v1beta2", "v1beta1")
PAGE = 1000  # Kueue's default and largest useful page of pending workloads
MAX_PAGES = 10  # a job further back than 10 000 is shown as "beyond 10000", not fetched page by page


@dataclass(frozen=True)
class QueuePlace:
    """A job's place: its LocalQueue and ClusterQueue, its 1-based positions (None: not pending there or not
    known), how long it has waited in all, and why the position is unknown when it is."""

    local_queue: str
    cluster_queue: str = ""
    in_local_queue: int | None = None
    in_cluster_queue: int | None = None
    waited_seconds: float | None = None
    unknown: str = ""  # why no position is shown ("" when there is one, or the job is not waiting)
    beyond: int | None = None  # the job was not among the first `beyond` pending workloads read

    def as_dict(self) -> dict[str, Any]:
        return {
            "localQueue": self.local_queue,
            "clusterQueue": self.cluster_queue,
            "positionInLocalQueue": self.in_local_queue,
            "positionInClusterQueue": self.in_cluster_queue,
            "waitedSeconds": self.waited_seconds,
            "unknown": self.unknown,
            "beyond": self.beyond,
        }


def pending_path(version: str, namespace: str, local_queue: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"


def local_queue_path(namespace: str, local_queue: str) -> str:
    return f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{local_queue}"


def queue_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("status") or {}).get("queue") or {}


def waiting(job: Mapping[str, Any]) -> bool:
    """The job waits for Kueue: it has a Workload and is not admitted (finished jobs wait for nothing)."""
    queue = queue_of(job)
    finished = (job_phase(job) or Phase.PENDING).finished
    return bool(queue.get("workload")) and not queue.get("admitted") and not finished


def waited_seconds(queue: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds queued in all: the finished waits (queuedSeconds) plus the current one (since queuedSince)."""
    if not queue:
        return None
    total = float(queue.get("queuedSeconds") or 0)
    since = parse_time(queue.get("queuedSince"))
    if since is not None:
        total += max((now - since).total_seconds(), 0.0)
    return total


def entry_of(items: Iterable[Mapping[str, Any]], workload: str) -> Mapping[str, Any] | None:
    for item in items:
        if (item.get("metadata") or {}).get("name") == workload:
            return item
    return None


def position(value: Any) -> int | None:
    """Kueue's positions count from 0; people count from 1."""
    return int(value) + 1 if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def place_of(
    job: Mapping[str, Any],
    now: datetime,
    pending: list[Mapping[str, Any]] | None,
    cluster_queue: str = "",
    unknown: str = "",
    complete: bool = True,
) -> QueuePlace:
    """The job's place, given its LocalQueue's pending workloads as read (None: they could not be read, `unknown`
    says why); `complete` is False when only the first pages were read."""
    queue = queue_of(job)
    cluster = cluster_queue or str(queue.get("clusterQueue") or "")
    base = QueuePlace(str(queue.get("name") or ""), cluster, waited_seconds=waited_seconds(queue, now))
    if not waiting(job):
        return base
    if pending is None:
        return QueuePlace(**{**base.__dict__, "unknown": unknown or "Kueue's visibility API did not answer"})
    entry = entry_of(pending, str(queue.get("workload")))
    if entry is None:
        if not complete:
            return QueuePlace(**{**base.__dict__, "beyond": len(pending)})
        why = "not in Kueue's pending list (being admitted, or its LocalQueue is missing or stopped)"
        return QueuePlace(**{**base.__dict__, "unknown": why})
    return QueuePlace(
        **{
            **base.__dict__,
            "in_local_queue": position(entry.get("positionInLocalQueue")),
            "in_cluster_queue": position(entry.get("positionInClusterQueue")),
        }
    )


def position_text(place: QueuePlace) -> str:
    """'3 in ClusterQueue gpus, 1 in LocalQueue team-a' (or why it is unknown); '' when the job is not waiting."""
    if place.in_cluster_queue is not None or place.in_local_queue is not None:
        cluster = f"ClusterQueue {place.cluster_queue}" if place.cluster_queue else "its ClusterQueue"
        return f"{place.in_cluster_queue} in {cluster}, {place.in_local_queue} in LocalQueue {place.local_queue}"
    if place.beyond is not None:
        return f"beyond the first {place.beyond} in LocalQueue {place.local_queue}"
    return f"unknown: {place.unknown}" if place.unknown else ""


def short_position(place: QueuePlace) -> str:
    """One token for a table cell: the ClusterQueue position (what decides when the job starts), '>N', or '?'."""
    if place.in_cluster_queue is not None:
        return str(place.in_cluster_queue)
    if place.beyond is not None:
        return f">{place.beyond}"
    return "?" if place.unknown else ""


class PositionReader:
    """Reads pending workloads per LocalQueue with a kubernetes_asyncio ApiClient, remembering which visibility
    version the server serves. Errors become the `unknown` text (a 403 names the missing permission)."""

    def __init__(self, api: Any, timeout: Any = None) -> None:
        self.api = api
        self.timeout = timeout
        self.version: str | None = None

    async def _get(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        """The JSON at `path` (the client's models are not built: Kueue's types are not among them)."""
        response = await self.api.call_api(
            path,
            "GET",
            query_params=query or [],
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=self.timeout,
        )
        try:
            await raise_for_status(response)
            return json.loads(await response.read())
        finally:
            response.release()

    async def pending(self, namespace: str, local_queue: str) -> tuple[list[Mapping[str, Any]] | None, str, bool]:
        """(pending workloads in order or None, why not, whether the list is complete)."""
        items: list[Mapping[str, Any]] = []
        for page in range(MAX_PAGES):
            query = [("limit", str(PAGE)), ("offset", str(page * PAGE))]
            try:
                body = await self._read_page(namespace, local_queue, query)
            except ApiException as error:
                if error.status == 404:
                    return None, "Kueue's visibility API is not served (Kueue not installed?)", True
                return None, f"HTTP {error.status}: {api_message(error)}", True
            except (OSError, TimeoutError, aiohttp.ClientError, ValueError) as error:
                return None, f"cannot reach the API server: {type(error).__name__}", True
            found = (body or {}).get("items") or [] if isinstance(body, dict) else []
            items += [item for item in found if isinstance(item, dict)]
            if len(found) < PAGE:
                return items, "", True
        return items, "", False

    async def _read_page(self, namespace: str, local_queue: str, query: list[tuple[str, str]]) -> Any:
        versions = (self.version,) if self.version else VERSIONS
        for index, version in enumerate(versions):
            try:
                body = await self._get(pending_path(version, namespace, local_queue), query)
                self.version = version
                return body
            except ApiException as error:
                if error.status != 404 or index == len(versions) - 1:
                    raise
        return None

    async def cluster_queue(self, namespace: str, local_queue: str) -> str:
        """The LocalQueue's ClusterQueue ('' when it cannot be read: a pending job names no ClusterQueue yet)."""
        try:
            body = await self._get(local_queue_path(namespace, local_queue))
        except (ApiException, OSError, TimeoutError, aiohttp.ClientError, ValueError):
            return ""
        return str(((body or {}).get("spec") or {}).get("clusterQueue") or "") if isinstance(body, dict) else ""

    async def places(self, jobs: Iterable[Mapping[str, Any]], now: datetime) -> dict[tuple[str, str], QueuePlace]:
        """The place of each waiting job among `jobs`, keyed (namespace, name): one read per LocalQueue."""
        waiting_jobs = [job for job in jobs if waiting(job)]
        read: dict[tuple[str, str], tuple[list[Mapping[str, Any]] | None, str, bool, str]] = {}
        result = {}
        for job in waiting_jobs:
            metadata = job.get("metadata") or {}
            key = (str(metadata.get("namespace") or ""), str(queue_of(job).get("name") or ""))
            if key not in read:
                pending, why, complete = await self.pending(*key)
                read[key] = (pending, why, complete, await self.cluster_queue(*key))
            pending, why, complete, cluster = read[key]
            result[(key[0], str(metadata.get("name") or ""))] = place_of(job, now, pending, cluster, why, complete)
        return result
