"""A real local HTTPS progress endpoint for the SDK tests: throwaway CA, server certificate, scripted answers.

The SDK is tested against real TLS and real HTTP (not a mocked urllib) so that certificate verification, headers
and error handling are exercised exactly as in a worker pod; only the answers are scripted.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainingjob.progress.tls import generate


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    cert_file: Path
    key_file: Path


def make_pki(directory: Path) -> Pki:
    """A fresh CA and a certificate for 127.0.0.1/localhost signed by it (the operator's own generator), as PEM
    files in `directory`. Every call makes a new CA, so one PKI's CA never trusts another's certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    material = generate(["localhost"], ["127.0.0.1"])
    pki = Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    pki.ca_file.write_text(material.ca_pem)
    pki.cert_file.write_text(material.cert_pem)
    pki.key_file.write_text(material.key_pem)
    return pki


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 202
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class ProgressEndpoint:
    """What the server received, and the answers it gives next (202 when the script is empty)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.received: list[Received] = []
        self.script: list[Answer] = []
        self._lock = threading.Lock()

    def answer(self, status: int, body: dict[str, Any] | None = None, **headers: str) -> None:
        """Queue one answer; header names use underscores for dashes (Retry_After)."""
        payload = b"" if body is None else json.dumps(body).encode()
        self.script.append(Answer(status, {k.replace("_", "-"): v for k, v in headers.items()}, payload))

    def _next(self, request: Received) -> Answer:
        with self._lock:
            self.received.append(request)
            return self.script.pop(0) if self.script else Answer()


def _handler(endpoint: ProgressEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            received = Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            answer = endpoint._next(received)
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


@contextmanager
def https_endpoint(pki: Pki) -> Iterator[ProgressEndpoint]:
    """A threaded HTTPS server on 127.0.0.1 (random port) using the PKI's server certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert_file, pki.key_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ProgressEndpoint("")))
    endpoint = ProgressEndpoint(f"https://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(endpoint)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def unused_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound and released at once), for 'the endpoint is down'."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# What the reporter tests share (tests/unit/test_sdk_reporting*.py; their fixtures: tests/unit/conftest.py).
PATH = "/v1/namespaces/ml-team/trainingjobs/resnet/progress"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def job_env(url: str, pki: Pki, token_file: Path, worker: str = "0") -> dict[str, str]:
    return {
        "TRAININGJOB_PROGRESS_URL": url,
        "TRAININGJOB_PROGRESS_CA_FILE": str(pki.ca_file),
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token_file),
        "TRAININGJOB_NAME": "resnet",
        "TRAININGJOB_NAMESPACE": "ml-team",
        "TRAININGJOB_WORKER_INDEX": worker,
    }


def sdk_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "trainingjob.sdk" and r.levelno >= logging.WARNING]
