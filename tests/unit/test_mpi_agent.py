"""The MPI remote-start agent (src/trainingjob/sdk/mpi_agent.py) as Open MPI uses it, with real processes on
127.0.0.1: the command's output and exit code come back; a client without the job's key runs nothing; a client
that hangs up takes its remote command with it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube import wait_until
from trainingjob.sdk import mpi_agent

AGENT = Path(mpi_agent.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """An agent serving on a free port; the env a client of the same job has, and the server's log."""
    key = tmp_path / "key"
    key.write_text(os.urandom(32).hex())
    env = {**os.environ, "TRAININGJOB_MPI_KEY_FILE": str(key), "TRAININGJOB_MPI_AGENT_PORT": str(free_port())}
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, str(AGENT), "serve"], env=env, stdout=out, stderr=out)
    wait_until(lambda: "serving" in log.read_text(), 30, "the agent to listen")
    yield env, log
    process.terminate()
    process.wait(10)


def run(env: dict[str, str], *words: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(AGENT), *words], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_output_and_exit_code_come_back_as_from_ssh(server: tuple[dict[str, str], Path]) -> None:
    env, _ = server
    # Open MPI passes options before the host (as it would to ssh) and quotes arguments for a remote shell.
    result = run(env, "-x", "127.0.0.1", "echo", '"out put"', ";", "echo err >&2", ";", "exit 3")
    assert (result.returncode, result.stdout) == (3, "out put\n")
    assert "err" in result.stderr


def test_a_client_without_the_jobs_key_runs_nothing(server: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, log = server
    other_key = tmp_path / "other"
    other_key.write_text(os.urandom(32).hex())
    marker = tmp_path / "ran"
    result = run({**env, "TRAININGJOB_MPI_KEY_FILE": str(other_key)}, "127.0.0.1", f"touch {marker}")
    assert result.returncode == 255 and "authentication failed" in result.stderr
    assert not marker.exists()
    assert "wrong key" in log.read_text()


def test_a_signature_is_good_for_one_challenge_and_one_command_only() -> None:
    key, nonce = os.urandom(32), os.urandom(32)
    mac = mpi_agent.sign(key, nonce, b"orted")
    assert mac != mpi_agent.sign(key, os.urandom(32), b"orted")  # a replay meets a new challenge
    assert mac != mpi_agent.sign(key, nonce, b"orted; rm -rf /")  # an altered command


def test_a_client_that_hangs_up_takes_its_command_with_it(server: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, log = server
    pid_file = tmp_path / "pid"
    client = subprocess.Popen(
        [sys.executable, str(AGENT), "127.0.0.1", f"echo $$ > {pid_file}; exec sleep 300"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the remote command"))
    client.send_signal(signal.SIGKILL)  # mpirun gone, the launcher pod deleted: no goodbye
    client.wait(10)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 30, "the remote command to be terminated")
    assert "client hung up" in log.read_text()


def test_a_worker_that_never_answers_is_reported_after_the_connect_timeout(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(os.urandom(32).hex())
    env = {**os.environ, "TRAININGJOB_MPI_KEY_FILE": str(key), "TRAININGJOB_MPI_AGENT_PORT": str(free_port())}
    started = time.monotonic()
    result = run({**env, "TRAININGJOB_MPI_CONNECT_TIMEOUT": "1"}, "127.0.0.1", "true")
    assert result.returncode != 0 and "cannot reach 127.0.0.1" in result.stderr
    assert time.monotonic() - started < 20
