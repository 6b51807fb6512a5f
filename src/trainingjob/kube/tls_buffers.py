"""asyncio's per-connection TLS read buffer, sized for a process that holds hundreds of TLS connections.

Why: asyncio's SSLProtocol allocates a read buffer of `SSLProtocol.max_size` (256 KiB in CPython 3.11-3.13) for
every TLS connection when it opens, and every connection of the operator is TLS: the writers' pool, the informers'
watches, the Lease, and the API server's calls to the webhooks (one connection per concurrent call over HTTP/1.1,
so a burst of creations opens dozens). In a 1000 x 8 creation burst traced with tracemalloc, 29 MiB of the
operator's Python heap were these buffers (234 of them) — more than the whole margin to the 150 MiB target. The
buffer only receives ciphertext from the socket: a TLS record is at most 16 KiB, and a smaller buffer means a few
more recv() calls for a large LIST page (a 4 MB page: 64 instead of 16), microseconds each.
"""

from __future__ import annotations

from asyncio import sslproto

READ_BUFFER_BYTES = 64 * 1024


def size_tls_read_buffers(size: int = READ_BUFFER_BYTES) -> None:
    """Set the buffer of every TLS connection this process opens or accepts from now on. Fails loudly when a Python
    release renames the attribute, rather than silently keeping 256 KiB per connection."""
    if not isinstance(getattr(sslproto.SSLProtocol, "max_size", None), int):
        raise RuntimeError("asyncio.sslproto.SSLProtocol.max_size is gone: see trainingjob/kube/tls_buffers.py")
    sslproto.SSLProtocol.max_size = size
