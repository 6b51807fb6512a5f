"""One attempt of one container, seen from the agent: start its shim, learn when it ends, signal it.

An attempt lives in `containers/<name>/<restartCount>/`. The agent records the shim's pid with its kernel start
time (shim.json), so after a restart it re-attaches to a shim that still runs and never signals a recycled pid.
Exit is learnt through a pidfd on the shim, which works for shims started by a previous agent too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainingjob.node.runtime.launch import (
    EXIT_FILE,
    LAUNCH_FILE,
    LOG_FILE,
    STARTED_FILE,
    TERMINATION_LOG,
    LaunchSpec,
    process_start_time,
    read_json,
    write_json,
)

SHIM_FILE = "shim.json"
START_TIMEOUT = 60.0


def alive(pid: int | None, start_time: int | None) -> bool:
    return pid is not None and start_time is not None and process_start_time(pid) == start_time


class ContainerProcess:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._popen: subprocess.Popen | None = None

    @property
    def attempt(self) -> int:
        return int(self.directory.name)

    @property
    def log_path(self) -> Path:
        return self.directory / LOG_FILE

    @property
    def termination_log(self) -> Path:
        return self.directory / TERMINATION_LOG

    def started(self) -> dict[str, Any] | None:
        return read_json(self.directory / STARTED_FILE)

    def exited(self) -> dict[str, Any] | None:
        return read_json(self.directory / EXIT_FILE)

    def cgroup_dirs(self) -> list[str]:
        """The cgroups this attempt's process was put in (launch.json; [] when unconfined or never started)."""
        return list((read_json(self.directory / LAUNCH_FILE) or {}).get("cgroups") or [])

    def shim(self) -> dict[str, Any] | None:
        return read_json(self.directory / SHIM_FILE)

    def shim_alive(self) -> bool:
        shim = self.shim()
        return shim is not None and alive(shim.get("pid"), shim.get("startTime"))

    def container_alive(self) -> bool:
        started = self.started()
        return started is not None and alive(started.get("pid"), started.get("pidStartTime"))

    def start(self, spec: LaunchSpec) -> None:
        """Write the launch spec and start the shim in its own session (it outlives the agent)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for name in ("upper", "work", "root", "tmp"):
            (self.directory / name).mkdir(exist_ok=True)
        (self.directory / "tmp").chmod(0o1777)
        self.termination_log.touch()
        self.termination_log.chmod(0o666)
        spec.write(self.directory)
        with (self.directory / "shim.log").open("ab") as output:
            self._popen = subprocess.Popen(
                [sys.executable, "-m", "trainingjob.node.runtime.shim", str(self.directory)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd="/",
            )
        write_json(
            self.directory / SHIM_FILE, {"pid": self._popen.pid, "startTime": process_start_time(self._popen.pid)}
        )

    async def wait_started(self) -> dict[str, Any] | None:
        """Until the process has exec'd (started.json) or failed to (exit.json); None if neither came."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            started, exited = self.started(), self.exited()
            if started is not None or exited is not None:
                return started
            if not self.shim_alive():
                break
            await asyncio.sleep(0.05)
        return self.started()

    async def wait_exit(self) -> None:
        """Returns when the shim has exited (it writes exit.json just before)."""
        shim = self.shim()
        if shim is None or not alive(shim.get("pid"), shim.get("startTime")):
            self._reap()
            return
        try:
            pidfd = os.pidfd_open(shim["pid"])
        except ProcessLookupError:
            self._reap()
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        loop.add_reader(pidfd, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._reap()

    def _reap(self) -> None:
        """Collect our own shim's exit status once it has exited (never blocks: on cancellation it may still run)."""
        if self._popen is not None:
            with contextlib.suppress(ChildProcessError):
                self._popen.poll()

    def signal(self, number: int) -> bool:
        """Signal the container; False when it no longer runs.

        In its own PID namespace only its PID 1 is signalled, as a container runtime does (runc kill): a process
        it forked (a DataLoader's workers) is its own to stop, and would die of an unhandled SIGTERM halfway
        through the checkpoint PID 1 saves on its way out. SIGKILL of PID 1 ends the whole namespace. Without a
        namespace (a node agent that is not root) the process group is the only handle on what it started.
        """
        started = self.started()
        if started is None or not alive(started.get("pid"), started.get("pidStartTime")):
            return False
        try:
            if started.get("pidNamespace") and number != signal.SIGKILL:
                os.kill(started["pid"], number)
            else:
                os.killpg(started["pid"], number)
        except ProcessLookupError:
            return False
        return True

    def kill_now(self) -> None:
        """SIGKILL the container and its shim (cleanup of a pod the API no longer has)."""
        self.signal(signal.SIGKILL)
        shim = self.shim()
        if shim and alive(shim.get("pid"), shim.get("startTime")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(shim["pid"], signal.SIGKILL)


def attempts(container_dir: Path) -> list[ContainerProcess]:
    """A container's attempts, oldest first."""
    if not container_dir.is_dir():
        return []
    numbered = sorted((int(p.name), p) for p in container_dir.iterdir() if p.name.isdigit())
    return [ContainerProcess(path) for _, path in numbered]


def prune_attempts(container_dir: Path, keep_from: int) -> None:
    """Drop attempts older than `keep_from` (the previous one stays, for `kubectl logs --previous`)."""
    for process in attempts(container_dir):
        if process.attempt < keep_from and not process.shim_alive():
            shutil.rmtree(process.directory, ignore_errors=True)
