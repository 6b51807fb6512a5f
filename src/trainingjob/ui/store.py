"""The UI's in-memory mirror of the TrainingJobs the user may see, and the fan-out of its changes to browsers.

One watch feeds it (ui/watcher.py); every open page is a subscriber with a bounded queue. A subscriber that falls
behind is dropped rather than buffered without bound: its browser reconnects (EventSource does that by itself)
and starts again from a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from trainingjob.api.readouts import phase_shown, progress_percent, running_workers
from trainingjob.ui.history import History

QUEUE_LIMIT = 1000
Key = tuple[str, str]


def job_key(job: dict[str, Any]) -> Key:
    metadata = job.get("metadata") or {}
    return metadata.get("namespace", ""), metadata.get("name", "")


def summary(job: dict[str, Any]) -> dict[str, Any]:
    """What the job list shows of a job (pure): identity, phase, workers, progress and ETA."""
    metadata, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    progress = status.get("progress") or {}
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
        "created": metadata.get("creationTimestamp"),
        "deleting": bool(metadata.get("deletionTimestamp")),
        "framework": spec.get("framework"),
        "workers": spec.get("workers"),
        "running": running_workers(job),
        "suspend": bool(spec.get("suspend")),
        "phase": phase_shown(job),
        "message": status.get("message") or "",
        "percent": progress_percent(progress) if progress else None,
        "epoch": progress.get("epoch"),
        "totalEpochs": progress.get("totalEpochs"),
        "metrics": progress.get("metrics") or {},
        "etaSeconds": progress.get("estimatedRemainingSeconds"),
        "simulated": bool(status.get("simulated")),
        "restarts": status.get("restartCount", 0),
        "queue": queue_summary(status.get("queue") or {}),
    }


def queue_summary(queue: dict[str, Any]) -> dict[str, Any] | None:
    """The job's queue as status.queue says it (None without Kueue); the position is read separately
    (ui/queue.py), as it is not in status."""
    if not queue:
        return None
    keys = ("name", "clusterQueue", "admitted", "reason", "queuedSince", "queuedSeconds")
    return {key: queue.get(key) for key in keys}


class Subscriber:
    """One browser connection: a bounded queue of (event, data) and, optionally, the one job it follows."""

    def __init__(self, job: Key | None = None) -> None:
        self.job = job
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(QUEUE_LIMIT)
        self.dropped = False

    def offer(self, event: str, data: Any) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait((event, data))
        except asyncio.QueueFull:
            self.dropped = True
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.get_nowait()
                self.queue.put_nowait(("resync", None))


class JobStore:
    """Jobs by (namespace, name), the watch's health, and the subscribers to tell about changes."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.jobs: dict[Key, dict[str, Any]] = {}
        self.synced = False
        self.scope: list[str] | None = None  # None: every namespace
        self.fallback = False  # True when the scope shrank because listing every namespace was forbidden
        self.problem: str | None = None  # why the mirror may be stale (shown as a banner), None when healthy
        self._subscribers: set[Subscriber] = set()

    # --- subscribers ---

    @contextlib.contextmanager
    def subscribe(self, job: Key | None = None) -> Iterator[Subscriber]:
        subscriber = Subscriber(job)
        self._subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            self._subscribers.discard(subscriber)

    def _publish_job(self, key: Key, event: str, job: dict[str, Any], point: dict[str, Any] | None) -> None:
        row = summary(job)
        for subscriber in list(self._subscribers):
            if subscriber.job is None:
                subscriber.offer(event, row if event == "upsert" else {"namespace": key[0], "name": key[1]})
            elif subscriber.job == key:
                subscriber.offer("job" if event == "upsert" else "deleted", job)
                if point is not None:
                    subscriber.offer("point", point)

    def _publish_watch_state(self) -> None:
        for subscriber in list(self._subscribers):
            subscriber.offer("watch", self.watch_state())

    def watch_state(self) -> dict[str, Any]:
        return {"synced": self.synced, "scope": self.scope, "fallback": self.fallback, "problem": self.problem}

    def snapshot(self) -> list[dict[str, Any]]:
        return [summary(job) for _, job in sorted(self.jobs.items())]

    # --- changes from the watch ---

    def set_problem(self, problem: str | None) -> None:
        if problem != self.problem:
            self.problem = problem
            self._publish_watch_state()

    def replace_all(self, jobs: list[dict[str, Any]], scope: list[str] | None, namespace: str | None = None) -> None:
        """A fresh listing of `namespace` (None: of every namespace): upsert what changed, delete what is gone
        there (the diff a watch gap needs)."""
        listed = {job_key(job): job for job in jobs}
        for key in set(self.jobs) - set(listed):
            if namespace is None or key[0] == namespace:
                self.delete(self.jobs[key])
        for job in listed.values():
            self.upsert(job)
        if scope is None:
            self.history.prune({(job.get("metadata") or {}).get("uid", "") for job in jobs})
        self.scope, self.synced = scope, True
        self._publish_watch_state()

    def upsert(self, job: dict[str, Any]) -> None:
        key = job_key(job)
        previous = self.jobs.get(key)
        if previous is not None and (previous.get("metadata") or {}).get("uid") != (job.get("metadata") or {}).get(
            "uid"
        ):
            self.history.forget((previous.get("metadata") or {}).get("uid", ""))
        self.jobs[key] = job
        point = self.history.record(job)
        self._publish_job(key, "upsert", job, point)

    def delete(self, job: dict[str, Any]) -> None:
        key = job_key(job)
        gone = self.jobs.pop(key, None) or job
        self.history.forget((gone.get("metadata") or {}).get("uid", ""))
        self._publish_job(key, "delete", gone, None)
