"""The local backend: a job's workers as processes of this machine, for quick iteration without a cluster.

The same code package as on the cluster (client/code.py: the launcher, the function or script, the SDK zip) is
written into a directory per job and started once per worker with the environment contract of a pod
(client/local_env.py); progress reports go to a loopback endpoint (client/sink.py) and become `status.progress`;
each worker's output goes to a log file, and followers are woken as it arrives. The job's body has the shape of a
TrainingJob on the cluster (phase, workerStatuses, progress, lastCheckpoint, conditions), so the client and its
progress display treat both alike.

What differs, on purpose: a failed worker fails the job at once (no restarts: this is for iterating); suspend stops
the processes and resume starts them again with RESUME_FROM_CHECKPOINT=true; scale restarts them with the new size.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.status import Phase
from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.client.code import CodePackage
from trainingjob.client.errors import AlreadyExists, NotFound, TrainingClientError
from trainingjob.client.local_env import LocalPaths, check_runnable, worker_environment
from trainingjob.client.local_run import LocalRun
from trainingjob.client.sink import ProgressSink, Reporter
from trainingjob.progress.report import Report, checkpoint_status, progress_status

LOCAL_NAMESPACE = "local"
STOP_GRACE_SECONDS = 10.0
PYTHONS = ("python", "python3")


def now() -> str:
    return format_time(datetime.datetime.now(datetime.UTC))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalBackend:
    """Jobs run as local processes under `directory` (a temporary one, removed on close, when not given), started
    with `python` (default: this interpreter) wherever the job's launcher says python or python3."""

    namespace = LOCAL_NAMESPACE

    def __init__(self, directory: str | Path | None = None, python: str | None = None) -> None:
        self.owned_directory = directory is None
        self.root = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="trainingjob-local-"))
        self.python = python or sys.executable
        self.runs: dict[str, LocalRun] = {}
        self.sink = ProgressSink(self._deliver)

    async def close(self) -> None:
        for run in list(self.runs.values()):
            await self._stop(run)
        await self.sink.close()
        if self.owned_directory:
            shutil.rmtree(self.root, ignore_errors=True)

    # Jobs ----------------------------------------------------------------------------------------------------------

    async def create(self, manifest: Mapping[str, Any], code: CodePackage | None) -> dict[str, Any]:
        if code is None:
            raise TrainingClientError(
                "the local backend runs functions and scripts given to train(); a manifest names an image, which "
                "only a cluster can run"
            )
        if (manifest.get("spec") or {}).get("runtimeRef"):
            raise TrainingClientError("the local backend has no runtimes: give the job's fields themselves")
        name = manifest["metadata"]["name"]
        if name in self.runs:
            raise AlreadyExists(f"{k.SINGULAR} {name} already exists", status=409, reason="AlreadyExists")
        body = copy.deepcopy(dict(manifest))
        body["metadata"] = {
            **body["metadata"],
            "namespace": LOCAL_NAMESPACE,
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "creationTimestamp": now(),
        }
        body["status"] = {"phase": Phase.PENDING.value, "restartCount": 0}
        check_runnable(TrainingJob.from_body(body))
        paths = LocalPaths(self.root / name)
        code.write_to(paths.code)
        run = LocalRun(body=body, paths=paths, code=code)
        self.runs[name] = run
        await self._start(run)
        return run.snapshot()

    async def get(self, name: str) -> dict[str, Any]:
        return self._run(name).snapshot()

    async def list(self, all_namespaces: bool = False) -> list[dict[str, Any]]:
        return [run.snapshot() for run in self.runs.values()]

    async def delete(self, name: str) -> None:
        run = self._run(name)
        await self._stop(run)
        del self.runs[name]
        run.deleted = True
        run.changed()

    async def set_suspend(self, name: str, suspend: bool) -> dict[str, Any]:
        run = self._run(name)
        run.body["spec"]["suspend"] = suspend
        if run.finished:
            return run.snapshot()
        if suspend and run.active:
            await self._stop(run)
            run.set_phase(Phase.SUSPENDED, "the job is suspended; resume starts its workers again")
        elif not suspend and run.phase is Phase.SUSPENDED:
            run.attempt += 1
            await self._start(run)
        return run.snapshot()

    async def scale(self, name: str, workers: int) -> dict[str, Any]:
        run = self._run(name)
        if workers < 1:
            raise TrainingClientError("workers must be at least 1")
        run.body["spec"]["workers"] = workers
        check_runnable(TrainingJob.from_body(run.body))
        if run.active:
            await self._stop(run)
            run.attempt += 1
            run.body["status"]["restartCount"] = run.attempt
            await self._start(run)
        return run.snapshot()

    async def changes(self, name: str) -> AsyncIterator[dict[str, Any]]:
        run = self._run(name)
        seen = -1
        while True:
            if run.deleted:
                raise NotFound(f"{k.SINGULAR} {name} was deleted", status=404)
            if run.version != seen:
                seen = run.version
                yield run.snapshot()
            await run.wait_for_change(seen)

    async def log_chunks(self, name: str, worker: int, follow: bool) -> AsyncIterator[bytes]:
        run = self._run(name)
        workers = int(run.body["spec"].get("workers", 1))
        if not 0 <= worker < workers:
            raise TrainingClientError(f"{k.SINGULAR} {name} has {workers} workers (0 to {workers - 1})")
        offset = 0
        while True:
            seen = run.version
            path = run.paths.log(worker)
            data = path.read_bytes()[offset:] if path.is_file() else b""
            if data:
                offset += len(data)
                yield data
            if not follow or (run.worker_done(worker) and not data) or run.deleted:
                return
            if not data:
                await run.wait_for_change(seen)

    def _run(self, name: str) -> LocalRun:
        run = self.runs.get(name)
        if run is None:
            raise NotFound(f"{k.SINGULAR} {LOCAL_NAMESPACE}/{name} not found", status=404, reason="NotFound")
        return run

    # Processes -----------------------------------------------------------------------------------------------------

    async def _start(self, run: LocalRun) -> None:
        job = TrainingJob.from_body(run.body)
        url = await self.sink.start()
        self.sink.revoke(job.name)
        port = free_port()
        run.paths.checkpoints.mkdir(parents=True, exist_ok=True)
        run.paths.hyperparameters.write_text(json.dumps(job.spec.hyperparameters))
        processes = []
        for index in range(job.spec.workers):
            token = run.paths.token(index)
            token.parent.mkdir(parents=True, exist_ok=True)
            token.write_text(self.sink.issue(Reporter(LOCAL_NAMESPACE, job.name, index)))
            token.chmod(0o600)
            env = {**os.environ, **worker_environment(job, index, run.attempt, port, run.paths, url)}
            env["PATH"] = f"{Path(self.python).parent}{os.pathsep}{env.get('PATH', '')}"
            processes.append(await self._spawn(run, index, env))
        run.begin(processes, now())
        run.supervisor = asyncio.create_task(self._supervise(run, processes), name=f"local-job-{job.name}")

    async def _spawn(self, run: LocalRun, index: int, env: dict[str, str]) -> asyncio.subprocess.Process:
        command = run.code.command(str(run.paths.code))
        if command[0] in PYTHONS:
            command[0] = self.python
        log = run.paths.log(index)
        log.parent.mkdir(parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_exec(
            *command,
            env=env,
            cwd=run.paths.directory,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping the job ends what the worker started too
        )
        run.readers.append(asyncio.create_task(self._copy_output(run, process, log)))
        return process

    async def _copy_output(self, run: LocalRun, process: asyncio.subprocess.Process, log: Path) -> None:
        """The worker's output into its log file as it comes, waking whoever follows the log."""
        assert process.stdout is not None
        with log.open("ab") as file:
            while chunk := await process.stdout.read(64 * 1024):
                file.write(chunk)
                file.flush()
                run.changed()

    async def _supervise(self, run: LocalRun, processes: list[asyncio.subprocess.Process]) -> None:
        """Until every worker exited 0 (Succeeded) or one failed (Failed, the others stopped)."""
        waits = {asyncio.ensure_future(process.wait()): index for index, process in enumerate(processes)}
        pending = set(waits)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                index, code = waits[finished], finished.result()
                run.worker_exited(index, code)
                if code != 0:
                    await self._stop(run, supervised=True)
                    run.fail(f"worker {index} exited with code {code}", now())
                    self.sink.revoke(run.name)
                    return
        await asyncio.gather(*run.readers, return_exceptions=True)  # the last output is in the logs first
        run.readers.clear()
        run.succeed(now())
        self.sink.revoke(run.name)

    async def _stop(self, run: LocalRun, supervised: bool = False) -> None:
        """End the run's processes: SIGTERM to each worker's process group, SIGKILL after STOP_GRACE_SECONDS."""
        if run.supervisor is not None and not supervised:
            run.supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run.supervisor
        run.supervisor = None
        alive = [process for process in run.processes if process.returncode is None]
        for process in alive:
            _signal_group(process, signal.SIGTERM)
        try:
            async with asyncio.timeout(STOP_GRACE_SECONDS):
                await asyncio.gather(*(process.wait() for process in alive))
        except TimeoutError:
            for process in alive:
                _signal_group(process, signal.SIGKILL)
            await asyncio.gather(*(process.wait() for process in alive))
        await asyncio.gather(*run.readers, return_exceptions=True)
        run.readers.clear()

    # Progress ------------------------------------------------------------------------------------------------------

    def _deliver(self, reporter: Reporter, report: Report) -> None:
        run = self.runs.get(reporter.job)
        if run is None or not run.active:
            return
        status = run.body["status"]
        status["progress"] = progress_status(report, status.get("progress") or {}, run.attempt_started)
        checkpoint = checkpoint_status(report)
        if checkpoint is not None:
            status["lastCheckpoint"] = checkpoint
        run.changed()


def _signal_group(process: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
