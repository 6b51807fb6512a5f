"""The per-container shim: starts the container's process, writes its log, records how it ended.

Run as `python -m trainingjob.node.runtime.shim <attempt-dir>` by the node agent, in its own session, so it outlives a
restart of the agent (the role containerd-shim plays). It
- joins the pod's network namespace and unshares a PID namespace, then forks the container's process, which
  builds its root filesystem in a new mount namespace (rootfs.py), sets its hostname (UTS) and identity, and execs;
  the process is PID 1 of its namespace, so when it exits every process it left behind dies with it;
- reports a failed start through a close-on-exec pipe (exit.json with reason StartError, exit code 128);
- copies stdout/stderr into container.log in the CRI format `<RFC3339Nano> <stream> <F|P> <line>` (what the
  kubelet's log endpoint reads: timestamps, streams, partial lines);
- writes exit.json when the process ends: exit code, or 128+N for signal N, and the times.
Without isolation (the agent not root) the process runs in the host's namespaces, in its own process group.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import sys
import time
from pathlib import Path

from trainingjob.node.runtime import cgroups
from trainingjob.node.runtime import syscalls as sc
from trainingjob.node.runtime.launch import (
    EXIT_FILE,
    LAUNCH_FILE,
    LOG_FILE,
    STARTED_FILE,
    LaunchSpec,
    process_start_time,
    write_json,
)
from trainingjob.node.runtime.rootfs import enter_rootfs

# Imported before the shim enters the container's root: the project's own files may not be visible from there
# (a checkout under /tmp is hidden by the pod's /tmp), so nothing may be imported lazily after enter_rootfs.
from trainingjob.node.runtime.security import CAPABILITY_NUMBERS

PARTIAL_LINE_BYTES = 16 * 1024
# After the main process of a non-isolated container exits, how long its leftover children may keep writing.
DRAIN_SECONDS = 2.0


def rfc3339(epoch_ns: int | None = None, nanos: bool = False) -> str:
    epoch_ns = time.time_ns() if epoch_ns is None else epoch_ns
    seconds, fraction = divmod(epoch_ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{base}.{fraction:09d}Z" if nanos else f"{base}Z"


def _drop_capabilities(keep: list[str]) -> None:
    last = (
        int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        if os.path.exists("/proc/sys/kernel/cap_last_cap")
        else 40
    )
    kept = {CAPABILITY_NUMBERS[name] for name in keep if name in CAPABILITY_NUMBERS}
    for number in range(last + 1):
        if number not in kept:
            sc.prctl(sc.PR_CAPBSET_DROP, number)


def assume_identity(spec: LaunchSpec) -> None:
    """The container's capabilities, groups and user, and no_new_privs (also for a process entering it)."""
    if os.geteuid() == 0:
        _drop_capabilities(spec.capabilities if spec.uid == 0 else [])
        os.setgroups(spec.groups)
        os.setgid(spec.gid)
        os.setuid(spec.uid)
    if spec.no_new_privs:
        sc.prctl(sc.PR_SET_NO_NEW_PRIVS, 1)


def _exec_container(spec: LaunchSpec, stdout: int, stderr: int, report: int) -> None:
    """In the child: namespaces, filesystem, identity, then exec (never returns). `report` stays open (it closes
    on exec) so that a failure in any later step still reaches the shim."""
    cgroups.join(spec.cgroups)  # first: nothing of the container runs outside its limits
    os.setsid()
    sc.prctl(sc.PR_SET_PDEATHSIG, signal.SIGKILL)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
    if spec.isolate:
        sc.unshare(sc.CLONE_NEWUTS | sc.CLONE_NEWIPC)
        sc.sethostname(spec.hostname)
        enter_rootfs(spec)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    os.closerange(3, report)
    os.closerange(report + 1, 65536)
    os.umask(0o022)
    if spec.cwd:
        if spec.isolate:
            os.makedirs(spec.cwd, exist_ok=True)
        os.chdir(spec.cwd)
    assume_identity(spec)
    if not spec.argv:
        raise OSError(0, "no command specified")
    try:
        os.execvpe(spec.argv[0], spec.argv, spec.env)
    except FileNotFoundError:
        raise OSError(2, f'exec: "{spec.argv[0]}": executable file not found in $PATH') from None
    except PermissionError:
        raise OSError(13, f'exec: "{spec.argv[0]}": permission denied') from None


class LogWriter:
    """CRI-format lines: full lines tagged F, a line longer than 16 KiB split into P pieces."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("ab", buffering=0)
        self.pending: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def _write(self, stream: str, tag: str, content: bytes) -> None:
        self.file.write(f"{rfc3339(nanos=True)} {stream} {tag} ".encode() + content + b"\n")

    def feed(self, stream: str, data: bytes) -> None:
        buffer = self.pending[stream] + data
        *lines, rest = buffer.split(b"\n")
        for line in lines:
            self._write(stream, "F", line)
        while len(rest) > PARTIAL_LINE_BYTES:
            self._write(stream, "P", rest[:PARTIAL_LINE_BYTES])
            rest = rest[PARTIAL_LINE_BYTES:]
        self.pending[stream] = rest

    def close(self) -> None:
        for stream, rest in self.pending.items():
            if rest:
                self._write(stream, "P", rest)
        self.file.close()


def _pump(pid: int, streams: dict[int, str], log: LogWriter, isolate: bool) -> int:
    """Copy output until the process has exited and its output is drained; returns its wait status."""
    selector = selectors.DefaultSelector()
    pidfd = os.pidfd_open(pid)
    selector.register(pidfd, selectors.EVENT_READ, "exit")
    for fd, name in streams.items():
        selector.register(fd, selectors.EVENT_READ, name)
    status: int | None = None
    deadline: float | None = None
    while streams or status is None:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        events = selector.select(timeout)
        if not events and deadline is not None:
            break
        for key, _ in events:
            if key.data == "exit":
                status = os.waitpid(pid, 0)[1]
                selector.unregister(pidfd)
                os.close(pidfd)
                deadline = time.monotonic() + DRAIN_SECONDS
                continue
            data = os.read(key.fd, 65536)
            if data:
                log.feed(key.data, data)
            else:
                selector.unregister(key.fd)
                os.close(key.fd)
                streams.pop(key.fd)
    if not isolate:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    assert status is not None
    return status


def exit_reason(exit_code: int, oom_kills: int) -> str:
    """containerd's reasons: OOMKilled when the OOM killer killed a process of the container and it failed."""
    if exit_code == 0:
        return "Completed"
    return "OOMKilled" if oom_kills else "Error"


def exit_record(status: int, started_at: str, oom_kills: int = 0) -> dict:
    code = os.waitstatus_to_exitcode(status)
    signal_number = -code if code < 0 else None
    exit_code = 128 + signal_number if signal_number is not None else code
    return {
        "exitCode": exit_code,
        "signal": signal_number,
        "reason": exit_reason(exit_code, oom_kills),
        "startedAt": started_at,
        "finishedAt": rfc3339(),
    }


def run(directory: Path) -> None:
    spec = LaunchSpec.read(directory / LAUNCH_FILE)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)  # the agent signals the container, never the shim
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    report_read, report_write = os.pipe2(os.O_CLOEXEC)
    if spec.isolate:
        if spec.netns:  # else hostNetwork: the host's network namespace
            fd = os.open(spec.netns, os.O_RDONLY)
            sc.setns(fd, sc.CLONE_NEWNET)
            os.close(fd)
        sc.unshare(sc.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        os.close(out_read)
        os.close(err_read)
        os.close(report_read)
        try:
            _exec_container(spec, out_write, err_write, report_write)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.write(report_write, str(error).encode()[:4000])
        os._exit(127)
    for fd in (out_write, err_write, report_write):
        os.close(fd)
    started_at = rfc3339()
    failure = b""
    while chunk := os.read(report_read, 4096):
        failure += chunk
    os.close(report_read)
    if failure:
        os.waitpid(pid, 0)
        message = failure.decode(errors="replace")
        record = {"exitCode": 128, "reason": "StartError", "message": message, "startedAt": None}
        write_json(directory / EXIT_FILE, {**record, "finishedAt": rfc3339()})
        return
    started = {
        "pid": pid,
        "pidStartTime": process_start_time(pid),
        "shimPid": os.getpid(),
        "startedAt": started_at,
        "pidNamespace": spec.isolate,  # PID 1 of its own namespace: signals go to it alone (containers.py)
    }
    write_json(directory / STARTED_FILE, started)
    log = LogWriter(directory / LOG_FILE)
    try:
        status = _pump(pid, {out_read: "stdout", err_read: "stderr"}, log, spec.isolate)
    finally:
        log.close()
    write_json(directory / EXIT_FILE, exit_record(status, started_at, cgroups.oom_kills(spec.cgroups)))


if __name__ == "__main__":
    run(Path(sys.argv[1]))
