"""Metric curves over time. status.progress holds only the newest report, so the UI records each new value it
sees in the job watch: one point per distinct (percent, epoch, step, metrics), keyed by the job's uid (a new job of
the same name starts a new curve), bounded per job, and appended to a JSON-lines file per job so a restarted
`tj ui` keeps what it saw. Updates made while no UI was running are not recoverable: the API keeps no history.
"""

from __future__ import annotations

import json
import re
from collections import deque
from pathlib import Path
from typing import Any

# Enough for a long run reported every few seconds; older points are dropped first.
MAX_POINTS = 5000
_UID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


def point_from_job(job: dict[str, Any]) -> dict[str, Any] | None:
    """The progress point status.progress shows now, or None when the job has reported nothing yet."""
    progress = (job.get("status") or {}).get("progress") or {}
    if not progress:
        return None
    point = {key: progress[key] for key in ("percent", "epoch", "totalEpochs", "step", "totalSteps") if key in progress}
    metrics = progress.get("metrics") or {}
    if not point and not metrics:
        return None
    point["metrics"] = {name: value for name, value in metrics.items() if isinstance(value, int | float)}
    checkpoint = (job.get("status") or {}).get("lastCheckpoint")
    if checkpoint:
        point["checkpoint"] = checkpoint
    point["time"] = progress.get("lastUpdateTime") or (job.get("metadata") or {}).get("creationTimestamp")
    return point


def same_measurement(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two points measure the same thing when all but the time agree (a status rewrite for another reason)."""
    return {k: v for k, v in a.items() if k != "time"} == {k: v for k, v in b.items() if k != "time"}


class History:
    """Progress points per job uid, in memory and (with `directory`) in one JSON-lines file per uid."""

    def __init__(self, directory: Path | None, max_points: int = MAX_POINTS) -> None:
        self.directory = directory
        self.max_points = max_points
        self._points: dict[str, deque[dict[str, Any]]] = {}
        self._lines: dict[str, int] = {}  # lines in each file, so it is rewritten once it holds twice the bound
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def _file(self, uid: str) -> Path | None:
        if self.directory is None or not _UID.match(uid):
            return None
        return self.directory / f"{uid}.jsonl"

    def _load(self, uid: str) -> deque[dict[str, Any]]:
        if uid in self._points:
            return self._points[uid]
        points: deque[dict[str, Any]] = deque(maxlen=self.max_points)
        path = self._file(uid)
        if path is not None and path.is_file():
            for line in path.read_text().splitlines():
                try:
                    value = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a crash
                if isinstance(value, dict):
                    points.append(value)
                self._lines[uid] = self._lines.get(uid, 0) + 1
        self._points[uid] = points
        return points

    def record(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """Append the job's current progress if it is new; returns the point appended, else None."""
        uid = (job.get("metadata") or {}).get("uid")
        point = point_from_job(job)
        if not uid or point is None:
            return None
        points = self._load(uid)
        if points and same_measurement(points[-1], point):
            return None
        points.append(point)
        path = self._file(uid)
        if path is not None:
            lines = self._lines.get(uid, 0)
            if lines >= 2 * self.max_points:
                path.write_text("".join(json.dumps(p) + "\n" for p in points))
                self._lines[uid] = len(points)
            else:
                with path.open("a") as stream:
                    stream.write(json.dumps(point) + "\n")
                self._lines[uid] = lines + 1
        return point

    def points(self, uid: str) -> list[dict[str, Any]]:
        return list(self._load(uid))

    def forget(self, uid: str) -> None:
        """The job is gone: drop its curve (a new job of the same name gets a new uid anyway)."""
        self._points.pop(uid, None)
        self._lines.pop(uid, None)
        path = self._file(uid)
        if path is not None:
            path.unlink(missing_ok=True)

    def prune(self, live_uids: set[str]) -> None:
        """Remove the files of jobs deleted while no UI was running (call only with a complete listing)."""
        if self.directory is None:
            return
        for path in self.directory.glob("*.jsonl"):
            if path.stem not in live_uids:
                self.forget(path.stem)
