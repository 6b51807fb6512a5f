"""The TLS read buffer the operator gives each connection (kube/tls_buffers.py), on a real TLS connection
through asyncio: the buffer a new connection allocates has the size set, not asyncio's 256 KiB."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from asyncio import sslproto
from collections.abc import Iterator

import pytest

from trainingjob import certs
from trainingjob.kube.tls_buffers import READ_BUFFER_BYTES, size_tls_read_buffers


@pytest.fixture
def restored() -> Iterator[None]:
    before = sslproto.SSLProtocol.max_size
    yield
    sslproto.SSLProtocol.max_size = before


async def buffer_sizes(tmp_path) -> list[int]:
    """The read buffers of both ends of one TLS connection over loopback."""
    day = datetime.timedelta(days=1)
    ca = certs.new_ca("test-ca", day)
    leaf = certs.issue(ca, certs.Leaf("127.0.0.1", server=True, ip_addresses=("127.0.0.1",)), day)
    (tmp_path / "cert.pem").write_text(leaf.cert_pem + ca.cert_pem)
    (tmp_path / "key.pem").write_text(leaf.key_pem)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_context = ssl.create_default_context(cadata=ca.cert_pem)
    accepted: list[asyncio.StreamWriter] = []
    connected = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        connected.set()
        await reader.read(1)

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context)
    await connected.wait()
    ends = [writer.transport, accepted[0].transport]
    sizes = [len(end._ssl_protocol._ssl_buffer) for end in ends]  # type: ignore[attr-defined]
    writer.write(b"x")
    writer.close()
    server.close()
    return sizes


def test_a_new_tls_connection_gets_the_smaller_buffer(tmp_path, restored) -> None:
    assert asyncio.run(buffer_sizes(tmp_path)) == [256 * 1024] * 2  # asyncio's own, proving what the test reads
    size_tls_read_buffers()
    assert asyncio.run(buffer_sizes(tmp_path)) == [READ_BUFFER_BYTES] * 2
