"""A real local HTTPS progress endpoint for the SDK tests: throwaway CA, server certificate, scripted answers.

The SDK is tested against real TLS and real HTTP (not a mocked urllib) so that certificate verification, headers
and error handling are exercised exactly as in a worker pod; only the answers are scripted.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    cert_file: Path
    key_file: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_pki(directory: Path, *, ca_name: str = "test progress CA") -> Pki:
    """A self-signed CA and a certificate for 127.0.0.1/localhost signed by it, as PEM files in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("trainingjob-operator"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    pki.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pki.key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
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
