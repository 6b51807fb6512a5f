"""One container of a pod across its attempts: the status view, the current process, restart back-off.

Also how a slot is rebuilt from disk after an agent restart: the newest attempt's files say whether it still runs
(its pid is alive and has the recorded start time), has ended (exit.json), or vanished without a trace (the shim
died with it: the kubelet's ContainerStatusUnknown, exit code 137).
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

from trainingjob.node.api.registration import now
from trainingjob.node.pods.status import ContainerView, Termination
from trainingjob.node.probes.spec import ProbeSpec
from trainingjob.node.runtime.containers import ContainerProcess
from trainingjob.node.runtime.launch import EXIT_FILE, write_json

BACKOFF_FIRST = 10.0
BACKOFF_MAX = 300.0
# A container that ran this long before failing restarts without back-off (the kubelet's reset rule).
BACKOFF_RESET_SECONDS = 600.0
TERMINATION_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048
UNKNOWN_EXIT = {
    "exitCode": 137,
    "reason": "ContainerStatusUnknown",
    "message": "The container could not be located when the pod was terminated",
}


@dataclass
class Slot:
    container: dict[str, Any]
    init: bool
    view: ContainerView
    process: ContainerProcess | None = None
    exit_task: asyncio.Task[None] | None = None
    restart_at: float | None = None
    backoff: float = 0.0
    retry_at: float | None = None
    start_failures: int = 0
    # The current attempt's probes (probes/spec.py), their prober task, and a kill a failed probe asked for.
    probes: dict[str, ProbeSpec] = field(default_factory=dict)
    prober: asyncio.Task[None] | None = None
    kill_task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.container["name"]

    @property
    def running(self) -> bool:
        return self.exit_task is not None and not self.exit_task.done()

    def next_attempt(self) -> int:
        if self.process is not None:
            return self.process.attempt + 1
        return self.view.restart_count + (1 if self.view.terminated is not None else 0)

    def next_backoff(self, ran_seconds: float) -> float:
        """Delay before this restart; the first restart is immediate, then 10 s doubling up to 5 min."""
        if ran_seconds >= BACKOFF_RESET_SECONDS:
            self.backoff = 0.0
        delay = self.backoff
        self.backoff = BACKOFF_FIRST if self.backoff == 0 else min(BACKOFF_MAX, self.backoff * 2)
        return delay


def container_id(process: ContainerProcess) -> str:
    return "process://" + hashlib.sha256(str(process.directory).encode()).hexdigest()


def _log_tail(process: ContainerProcess) -> str | None:
    try:
        raw = process.log_path.read_bytes()[-64 * 1024 :]
    except OSError:
        return None
    lines = [line.split(b" ", 3)[3] if line.count(b" ") >= 3 else line for line in raw.splitlines()]
    text = b"\n".join(lines[-FALLBACK_LOG_LINES:])[-FALLBACK_LOG_BYTES:]
    return text.decode(errors="replace") or None


def termination_of(slot: Slot, process: ContainerProcess, record: dict[str, Any]) -> Termination:
    """The terminated state from exit.json, with the termination message as the kubelet reads it."""
    message = record.get("message")
    if record.get("reason") != "StartError":
        try:
            message = process.termination_log.read_bytes()[:TERMINATION_MESSAGE_BYTES].decode(errors="replace") or None
        except OSError:
            message = None
        policy = slot.container.get("terminationMessagePolicy")
        if message is None and policy == "FallbackToLogsOnError" and record["exitCode"] != 0:
            message = _log_tail(process)
    return Termination(
        exit_code=record["exitCode"],
        reason=record.get("reason") or ("Completed" if record["exitCode"] == 0 else "Error"),
        finished_at=record.get("finishedAt") or now(),
        started_at=record.get("startedAt"),
        message=message,
        signal=record.get("signal"),
        container_id=container_id(process),
    )


def unknown_termination(started_at: str | None = None, container: str | None = None) -> Termination:
    return Termination(
        exit_code=UNKNOWN_EXIT["exitCode"],
        reason=UNKNOWN_EXIT["reason"],
        finished_at=now(),
        started_at=started_at,
        message=UNKNOWN_EXIT["message"],
        container_id=container,
    )


def record_lost(process: ContainerProcess) -> dict[str, Any]:
    """Write exit.json for an attempt that vanished, so every later look at it agrees."""
    started = process.started() or {}
    record = {**UNKNOWN_EXIT, "startedAt": started.get("startedAt"), "finishedAt": now()}
    write_json(process.directory / EXIT_FILE, record)
    return record


def api_container_status(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The container's status entry as the API last saw it."""
    status = pod.get("status") or {}
    entries = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return next((entry for entry in entries if entry.get("name") == name), None)


def api_restart_count(pod: dict[str, Any], name: str) -> tuple[int, bool]:
    """(restartCount, had it started) of a container as the API last saw it."""
    status = pod.get("status") or {}
    for entry in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if entry.get("name") == name:
            state = entry.get("state") or {}
            started = "running" in state or "terminated" in state or bool(entry.get("lastState"))
            return int(entry.get("restartCount") or 0), started
    return 0, False
