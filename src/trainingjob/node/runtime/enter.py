"""Run a command inside a running container, as `crictl exec` does: what an exec probe needs.

`python -m trainingjob.node.runtime.enter <attempt-dir> <command...>`: joins the container's cgroups and its IPC,
UTS, network, PID and mount namespaces (those of its PID 1, recorded in started.json and checked against its start
time, so a recycled pid is never entered), takes its root directory, then forks the command with the container's
environment, working directory, user and capabilities. Exits with the command's exit code (128+N for signal N);
126 when the container does not run. Without isolation the command runs on the host with the same identity.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from trainingjob.node.runtime import cgroups
from trainingjob.node.runtime import syscalls as sc
from trainingjob.node.runtime.launch import LAUNCH_FILE, STARTED_FILE, LaunchSpec, process_start_time, read_json
from trainingjob.node.runtime.shim import assume_identity

# setns order as nsenter(1) uses it: the mount namespace last, then the container's root.
NAMESPACES = (("ipc", sc.CLONE_NEWIPC), ("uts", sc.CLONE_NEWUTS), ("net", sc.CLONE_NEWNET), ("pid", sc.CLONE_NEWPID))
NOT_RUNNING = 126


def _enter(pid: int, spec: LaunchSpec) -> None:
    handles = [(os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY), flag) for name, flag in NAMESPACES]
    mount = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    cgroups.join(spec.cgroups)
    for fd, flag in handles:
        sc.setns(fd, flag)
        os.close(fd)
    sc.setns(mount, sc.CLONE_NEWNS)
    os.close(mount)
    os.fchdir(root)
    os.chroot(".")
    os.close(root)


def _run(spec: LaunchSpec, argv: list[str]) -> int:
    child = os.fork()
    if child == 0:
        try:
            os.chdir(spec.cwd or "/")
            assume_identity(spec)
            os.execvpe(argv[0], argv, spec.env)
        except OSError as error:
            os.write(2, f"exec {argv[0]!r} failed: {error.strerror or error}\n".encode())
        os._exit(127)
    status = os.waitpid(child, 0)[1]
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def run(directory: Path, argv: list[str]) -> int:
    spec = LaunchSpec.read(directory / LAUNCH_FILE)
    started = read_json(directory / STARTED_FILE) or {}
    pid = started.get("pid")
    if not argv or pid is None or process_start_time(pid) != started.get("pidStartTime"):
        os.write(2, b"the container is not running\n")
        return NOT_RUNNING
    if spec.isolate:
        _enter(pid, spec)
    return _run(spec, argv)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), sys.argv[2:]))
