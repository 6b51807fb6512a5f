"""Start, watch and stop component processes by pid; probe their health endpoints; find free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from trainingjob.cluster.components import HealthCheck
from trainingjob.cluster.errors import ClusterError, log_tail


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start(
    name: str,
    command: list[str],
    log_path: Path,
    cwd: Path,
    preexec: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Start a component in its own session (it outlives `tj cluster up`), output to its log file. `preexec` runs in
    the child before exec (Kueue's private mount namespace); `env` replaces the environment it inherits."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=preexec,
        )
    _wait_for_exec(process, command)
    return process.pid


def _wait_for_exec(process: subprocess.Popen, command: list[str], timeout: float = 10.0) -> None:
    """Until exec completes, /proc shows the forked Python (its binary and command line): pid checks against the
    component's binary or command line would misfire. A Python component has the same binary before and after,
    so the command line is what tells."""
    binary = str(Path(command[0]).resolve())
    expected = "\0".join(command).encode() + b"\0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if _executable(process.pid) == binary and _command_line(process.pid) == expected:
            return
        time.sleep(0.01)


def _executable(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def is_running(pid: int, binary: str | None = None, marker: str | None = None) -> bool:
    """True if `pid` is a live (not zombie) process, and runs `binary` with `marker` in its command line when given
    (guards against pid reuse: the local node agents are run by the same Python as the operator and the tests, so
    the binary alone cannot tell a dead agent's pid from a new process that got it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    if state in ("Z", "X"):
        _reap(pid)
        return False
    if binary is not None and _executable(pid) != str(Path(binary).resolve()):
        return False
    return marker is None or marker.encode() in _command_line(pid)


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _reap(pid: int) -> None:
    """Collect a dead child of ours so it does not linger as a zombie (not our child: nothing to do)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(pid: int, binary: str | None, grace_seconds: float = 10.0, marker: str | None = None) -> None:
    """SIGTERM, then SIGKILL after the grace period; only if the pid still runs our binary (with `marker`, see
    is_running).

    Once signalled, a process loses its /proc exe link while it exits, so from then on we wait for the pid itself.
    """
    if not is_running(pid, binary, marker):
        return
    os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, grace_seconds):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, grace_seconds)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.05)
    return not is_running(pid)


def _ssl_context(check: HealthCheck, ca_file: Path) -> ssl.SSLContext:
    if not check.verify_ca:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    context = ssl.create_default_context(cafile=str(ca_file))
    if check.client_cert:
        context.load_cert_chain(f"{check.client_cert}.crt", f"{check.client_cert}.key")
    return context


def probe(check: HealthCheck, ca_file: Path, timeout: float = 2.0) -> tuple[bool, str]:
    """One health request: (healthy, what it answered)."""
    context = _ssl_context(check, ca_file) if check.url.startswith("https") else None
    try:
        with urllib.request.urlopen(check.url, timeout=timeout, context=context) as response:
            return response.status == 200, response.read(200).decode(errors="replace")
    except urllib.error.HTTPError as error:
        return False, f"HTTP {error.code}"
    except (OSError, ssl.SSLError) as error:
        return False, str(getattr(error, "reason", error))


def wait_healthy(
    name: str, pid: int, binary: str, check: HealthCheck, ca_file: Path, log_path: Path, timeout: float
) -> None:
    """Poll until healthy; fail at once with the log tail if the process exits, or after `timeout`."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if not is_running(pid, binary):
            raise ClusterError(f"{name} exited during startup; last lines of {log_path}:\n{log_tail(log_path)}")
        healthy, last = probe(check, ca_file)
        if healthy:
            return
        time.sleep(0.25)
    raise ClusterError(
        f"{name} was not ready within {timeout:.0f}s (last answer: {last}); "
        f"last lines of {log_path}:\n{log_tail(log_path)}"
    )
