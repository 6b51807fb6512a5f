"""One job of the local backend: its body (a TrainingJob's shape, status included), its processes, and a change
counter that followers wait on (no polling: every status change and every chunk of output wakes them)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.status import Phase, job_phase
from trainingjob.client.code import CodePackage
from trainingjob.client.local_env import LocalPaths
from trainingjob.kube.phases import PodPhase

ACTIVE_PHASES = (Phase.PENDING, Phase.RUNNING)


@dataclass(eq=False)
class LocalRun:
    body: dict[str, Any]
    paths: LocalPaths
    code: CodePackage
    attempt: int = 0
    attempt_started: str | None = None
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    supervisor: asyncio.Task[None] | None = None
    version: int = 0
    deleted: bool = False
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def status(self) -> dict[str, Any]:
        return self.body["status"]

    @property
    def phase(self) -> Phase:
        return job_phase(self.body) or Phase.PENDING

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE_PHASES

    @property
    def finished(self) -> bool:
        return self.phase.finished

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def changed(self) -> None:
        """Something a follower may want: a new status or new output."""
        self.version += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_for_change(self, seen: int) -> None:
        if self.version == seen:
            await self._event.wait()

    def worker_done(self, index: int) -> bool:
        """Whether worker `index` of the current attempt has exited and its output is all in its log (a job that is
        not active has no worker left to wait for)."""
        if index < len(self.readers):
            return self.readers[index].done()
        return not self.active

    # Status --------------------------------------------------------------------------------------------------------

    def begin(self, processes: list[asyncio.subprocess.Process], time: str) -> None:
        self.processes = processes
        self.attempt_started = time
        self.status.setdefault("startTime", time)
        self.status.update(
            phase=Phase.RUNNING.value,
            message="",
            restartCount=self.attempt,
            workerStatuses=[{"workerId": index, "phase": PodPhase.RUNNING.value} for index in range(len(processes))],
        )
        self.changed()

    def worker_exited(self, index: int, code: int) -> None:
        for entry in self.status.get("workerStatuses") or []:
            if entry["workerId"] == index:
                entry.update(phase=(PodPhase.SUCCEEDED if code == 0 else PodPhase.FAILED).value, exitCode=code)
        self.changed()

    def set_phase(self, phase: Phase, message: str) -> None:
        self.status.update(phase=phase.value, message=message)
        for entry in self.status.get("workerStatuses") or []:
            if entry["phase"] == PodPhase.RUNNING:
                entry["phase"] = "Terminated"
        self.changed()

    def fail(self, message: str, time: str) -> None:
        self._finish(Phase.FAILED, "WorkerFailed", message, time)

    def succeed(self, time: str) -> None:
        self._finish(Phase.SUCCEEDED, "TrainingSucceeded", "every worker exited 0", time)

    def _finish(self, phase: Phase, reason: str, message: str, time: str) -> None:
        condition = {
            "type": phase.value,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": time,
        }
        self.status.update(phase=phase.value, message=message, completionTime=time, conditions=[condition])
        self.changed()
