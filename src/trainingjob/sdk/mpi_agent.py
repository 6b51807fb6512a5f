"""Remote start for MPI without ssh: Open MPI's rsh launcher runs its daemons on the workers through this agent.

The operator ships this file (Python's standard library only, no other import) in the job's ConfigMap and points
Open MPI at it (`OMPI_MCA_plm_rsh_agent="python3 /etc/trainingjob/mpi-agent.py"`); the workers of a job with a
launcher run `python3 /etc/trainingjob/mpi-agent.py serve`.

    serve                     listen on TRAININGJOB_MPI_AGENT_PORT and run the commands the launcher sends
    [-opts] HOST COMMAND...   what Open MPI calls instead of `ssh HOST COMMAND...`: run COMMAND on HOST through its
                              agent, relay its output, exit with its exit code

Why it is safe enough: every request answers a fresh random challenge from the server with an HMAC-SHA256 over the
challenge and the command, keyed by the job's secret (TRAININGJOB_MPI_KEY_FILE, mounted from the Secret
<job>-mpi-key that only this job's pods mount). Without the key nothing runs; a recorded request cannot be replayed
(the challenge differs) or altered (the HMAC covers the command). The traffic itself is not encrypted, like Open
MPI's own TCP traffic between the ranks: restrict the pod network (NetworkPolicy) where others can listen on it.

Like ssh, the command runs through `/bin/sh -c` (Open MPI quotes its arguments for a remote shell), with the
agent's environment (the worker pod's), no stdin, in its own process group; when the connection drops (mpirun
ended, the launcher died) that group is terminated.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

MAGIC = b"TJMPI1\n"
NONCE_BYTES = 32
MAC_BYTES = 32
MAX_COMMAND = 1 << 20
STDOUT, STDERR, EXIT, ERROR = 1, 2, 3, 4
HEADER = struct.Struct("!BI")
DEFAULT_PORT = 29500
KILL_GRACE_SECONDS = 5.0


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def read_key() -> bytes:
    path = os.environ.get("TRAININGJOB_MPI_KEY_FILE", "")
    if not path:
        raise SystemExit("mpi-agent: TRAININGJOB_MPI_KEY_FILE is not set")
    with open(path, "rb") as handle:
        key = handle.read().strip()
    if len(key) < 16:
        raise SystemExit(f"mpi-agent: the key in {path} is too short")
    return key


def sign(key: bytes, nonce: bytes, command: bytes) -> bytes:
    return hmac.new(key, nonce + command, hashlib.sha256).digest()


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise ConnectionError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def send_frame(sock: socket.socket, lock: threading.Lock, kind: int, data: bytes) -> None:
    with lock:
        sock.sendall(HEADER.pack(kind, len(data)) + data)


def log(message: str) -> None:
    print(f"mpi-agent: {message}", file=sys.stderr, flush=True)


# --- server (the workers) ------------------------------------------------------------------------------------------


def _pump(stream, sock: socket.socket, lock: threading.Lock, kind: int) -> None:
    try:
        for chunk in iter(lambda: stream.read1(65536), b""):
            send_frame(sock, lock, kind, chunk)
    except OSError:
        pass  # the client is gone; the watcher ends the process


def _terminate(process: subprocess.Popen) -> None:
    """The command's whole process group: SIGTERM, then SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        if wait is None:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _watch_client(sock: socket.socket, process: subprocess.Popen) -> None:
    """The client sends nothing after its request: readable means it hung up."""
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass
    if process.poll() is None:
        log(f"client hung up; terminating process group {process.pid}")
        _terminate(process)


def handle(sock: socket.socket, peer: str) -> None:
    lock = threading.Lock()
    with sock:
        nonce = os.urandom(NONCE_BYTES)
        sock.sendall(MAGIC + nonce)
        length, mac = struct.unpack("!I", recv_exact(sock, 4))[0], recv_exact(sock, MAC_BYTES)
        if length > MAX_COMMAND:
            send_frame(sock, lock, ERROR, b"command too long")
            return
        command = recv_exact(sock, length)
        if not hmac.compare_digest(mac, sign(read_key(), nonce, command)):
            log(f"refused a request from {peer}: wrong key")
            send_frame(sock, lock, ERROR, b"authentication failed")
            return
        text = command.decode("utf-8", "replace")
        log(f"running for {peer}: {text[:300]}")
        process = subprocess.Popen(
            ["/bin/sh", "-c", text],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        pumps = [
            threading.Thread(target=_pump, args=(process.stdout, sock, lock, STDOUT), daemon=True),
            threading.Thread(target=_pump, args=(process.stderr, sock, lock, STDERR), daemon=True),
        ]
        for thread in pumps:
            thread.start()
        threading.Thread(target=_watch_client, args=(sock, process), daemon=True).start()
        code = process.wait()
        for thread in pumps:
            thread.join()
        code = 128 - code if code < 0 else code
        log(f"command for {peer} exited with {code}")
        with contextlib.suppress(OSError):
            send_frame(sock, lock, EXIT, struct.pack("!i", code))


def _safe_handle(sock: socket.socket, peer: str) -> None:
    try:
        handle(sock, peer)
    except (OSError, ConnectionError, struct.error) as error:
        log(f"connection from {peer} ended: {error}")


def serve() -> int:
    read_key()  # fail at start, not at the first request, when the key is missing
    port = _env_int("TRAININGJOB_MPI_AGENT_PORT", DEFAULT_PORT)
    server = socket.create_server(("", port), backlog=128)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log(f"serving on port {port}")
    while True:
        sock, address = server.accept()
        threading.Thread(target=_safe_handle, args=(sock, f"{address[0]}:{address[1]}"), daemon=True).start()


# --- client (the launcher, and daemons spawning daemons) ----------------------------------------------------------


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """Retry while the worker's name does not resolve yet or its agent does not listen yet (it may be starting)."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        try:
            return socket.create_connection((host, port), timeout=30)
        except OSError as error:
            if time.monotonic() >= deadline:
                raise SystemExit(f"mpi-agent: cannot reach {host}:{port}: {error}") from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def run_remote(host: str, words: list[str]) -> int:
    command = " ".join(words).encode()
    port = _env_int("TRAININGJOB_MPI_AGENT_PORT", DEFAULT_PORT)
    sock = connect(host, port, _env_int("TRAININGJOB_MPI_CONNECT_TIMEOUT", 300))
    with sock:
        sock.settimeout(None)
        greeting = recv_exact(sock, len(MAGIC) + NONCE_BYTES)
        if not greeting.startswith(MAGIC):
            raise SystemExit(f"mpi-agent: {host}:{port} is not an MPI agent")
        nonce = greeting[len(MAGIC) :]
        sock.sendall(struct.pack("!I", len(command)) + sign(read_key(), nonce, command) + command)
        outputs = {STDOUT: sys.stdout.buffer, STDERR: sys.stderr.buffer}
        while True:
            try:
                kind, length = HEADER.unpack(recv_exact(sock, HEADER.size))
                data = recv_exact(sock, length)
            except ConnectionError:
                log(f"{host} closed the connection before the command ended")
                return 255
            if kind in outputs:
                outputs[kind].write(data)
                outputs[kind].flush()
            elif kind == EXIT:
                return struct.unpack("!i", data)[0]
            else:
                log(f"{host}: {data.decode('utf-8', 'replace')}")
                return 255


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve()
    words = list(argv)
    while words and words[0].startswith("-"):  # ssh-style options Open MPI may pass (e.g. -x): nothing to do
        words.pop(0)
    if len(words) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    return run_remote(words[0], words[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
