"""The cluster DNS each node serves to its pods on its node IP, port 53 (UDP and TCP), fed by watches.

Names, as CoreDNS's kubernetes plugin answers them (cluster domain cluster.local):
- `<service>.<ns>.svc.cluster.local`: a headless Service's endpoint addresses, or a Service's cluster IP
  (cluster IPs are not routed on the local cluster: no kube-proxy), or a CNAME for an ExternalName Service;
- `<hostname>.<service>.<ns>.svc.cluster.local`: the endpoint with that hostname (a pod whose `hostname` and
  `subdomain` match a headless Service: how workers find each other);
- `<a-b-c-d>.<ns>.pod.cluster.local`: that address.
Endpoints come from EndpointSlices, counting only ready ones unless the Service publishes not-ready addresses.
Other names are forwarded to the host's resolver. Records are indexed as watch events arrive; nothing is polled.

Every pod on the node reaches it, so it is bounded (issue 41): at most UDP_IN_FLIGHT queries are answered at once
(more are dropped, as a busy resolver drops them; clients retry), at most TCP_CONNECTIONS TCP connections are open,
and each TCP message must arrive whole within TCP_MESSAGE_SECONDS. Before, a TCP client that sent a length and
then stopped was held for good, and a flood of forwarded queries opened a socket each without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any

from trainingjob.node.config import CLUSTER_DOMAIN
from trainingjob.node.network import dnswire as w
from trainingjob.node.network.sandbox import _host_resolv

log = logging.getLogger(__name__)
TTL = 5
SUFFIX = "." + CLUSTER_DOMAIN
FORWARD_TIMEOUT = 2.0
UDP_IN_FLIGHT = 256
TCP_CONNECTIONS = 64
TCP_MESSAGE_SECONDS = 10.0


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


class DnsRecords:
    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}
        # (namespace, service) -> {slice key: slice}
        self.slices: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def on_service(self, kind: str, service: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.services.pop(_key(service), None)
        else:
            self.services[_key(service)] = service

    def on_slice(self, kind: str, endpoint_slice: dict[str, Any]) -> None:
        metadata = endpoint_slice["metadata"]
        owner = (metadata.get("labels") or {}).get("kubernetes.io/service-name")
        if not owner:
            return
        group = self.slices.setdefault((metadata["namespace"], owner), {})
        if kind == "DELETED":
            group.pop(_key(endpoint_slice), None)
        else:
            group[_key(endpoint_slice)] = endpoint_slice

    def _endpoints(self, namespace: str, service: dict[str, Any]) -> list[dict[str, Any]]:
        publish = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
        found = []
        for endpoint_slice in self.slices.get((namespace, service["metadata"]["name"]), {}).values():
            if endpoint_slice.get("addressType", "IPv4") != "IPv4":
                continue
            for endpoint in endpoint_slice.get("endpoints") or []:
                ready = (endpoint.get("conditions") or {}).get("ready", True)
                if ready or publish:
                    found.append(endpoint)
        return found

    def lookup(self, name: str, qtype: int) -> tuple[int, list[w.Answer]] | None:
        """(rcode, answers) for a cluster name; None for a name outside the cluster domain."""
        if not name.endswith(SUFFIX):
            return None
        parts = name[: -len(SUFFIX)].split(".")
        addresses: list[str] = []
        cname: str | None = None
        if len(parts) == 3 and parts[2] == "pod":
            addresses = [parts[0].replace("-", ".")]
        elif len(parts) in (3, 4) and parts[-1] == "svc":
            namespace, service_name = parts[-2], parts[-3]
            service = self.services.get(f"{namespace}/{service_name}")
            if service is None:
                return w.RCODE_NXDOMAIN, []
            spec = service.get("spec") or {}
            endpoints = self._endpoints(namespace, service)
            if len(parts) == 4:
                addresses = [a for e in endpoints if e.get("hostname") == parts[0] for a in e.get("addresses") or []]
                if not addresses:
                    return w.RCODE_NXDOMAIN, []
            elif spec.get("type") == "ExternalName":
                cname = spec.get("externalName")
            elif spec.get("clusterIP") in (None, "", "None"):
                addresses = [a for e in endpoints for a in e.get("addresses") or []]
            else:
                addresses = [spec["clusterIP"]]
        else:
            return w.RCODE_NXDOMAIN, []
        if cname:
            return w.RCODE_OK, [w.cname_record(cname, TTL)]
        if qtype != w.TYPE_A:
            return w.RCODE_OK, []
        try:
            return w.RCODE_OK, [w.a_record(a, TTL) for a in dict.fromkeys(addresses)]
        except ValueError:
            return w.RCODE_NXDOMAIN, []


class _Relay(asyncio.DatagramProtocol):
    """Receives the upstream resolver's answer to one forwarded query."""

    def __init__(self, done: asyncio.Future[bytes]) -> None:
        self.done = done

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if not self.done.done():
            self.done.set_result(data)


class DnsServer:
    def __init__(self, records: DnsRecords, host: str, port: int = 53) -> None:
        self.records = records
        self.host = host
        self.port = port
        self.upstreams = [s for s in _host_resolv()[0]] or ["127.0.0.1"]
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.AbstractServer | None = None
        self.replies: set[asyncio.Task[None]] = set()
        self.tcp_open = 0
        self.dropped = 0  # UDP queries dropped, and TCP connections refused, for being past the bounds

    async def answer(self, message: bytes, max_size: int | None) -> bytes | None:
        try:
            query = w.parse_query(message)
        except w.DnsFormatError:
            return w.error_response(message, w.RCODE_FORMERR)
        result = self.records.lookup(query.name, query.qtype)
        if result is None:
            return await self._forward(message) or w.response(query, [], w.RCODE_SERVFAIL)
        rcode, answers = result
        return w.response(query, answers, rcode, max_size=query.udp_size if max_size else None)

    async def _forward(self, message: bytes) -> bytes | None:
        loop = asyncio.get_running_loop()
        for upstream in self.upstreams:
            done: asyncio.Future[bytes] = loop.create_future()
            transport, _ = await loop.create_datagram_endpoint(lambda f=done: _Relay(f), remote_addr=(upstream, 53))
            try:
                transport.sendto(message)
                return await asyncio.wait_for(done, FORWARD_TIMEOUT)
            except (TimeoutError, OSError):
                continue
            finally:
                transport.close()
        return None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        server = self

        class Udp(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def datagram_received(self, data: bytes, addr: Any) -> None:
                if len(server.replies) >= UDP_IN_FLIGHT:
                    server.dropped += 1
                    return

                async def reply() -> None:
                    answer = await server.answer(data, 512)
                    if answer is not None:
                        self.transport.sendto(answer, addr)  # type: ignore[attr-defined]

                task = loop.create_task(reply())
                server.replies.add(task)
                task.add_done_callback(server.replies.discard)

        self._udp, _ = await loop.create_datagram_endpoint(Udp, local_addr=(self.host, self.port), reuse_port=True)
        self._tcp = await asyncio.start_server(self._serve_tcp, self.host, self.port, reuse_address=True)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.tcp_open >= TCP_CONNECTIONS:
            self.dropped += 1
            writer.transport.abort()
            return
        self.tcp_open += 1
        try:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                while True:
                    async with asyncio.timeout(TCP_MESSAGE_SECONDS):  # the length and the message, whole
                        size = struct.unpack("!H", await reader.readexactly(2))[0]
                        message = await reader.readexactly(size)
                    answer = await self.answer(message, None)
                    if answer is None:
                        break
                    writer.write(struct.pack("!H", len(answer)) + answer)
                    await asyncio.wait_for(writer.drain(), TCP_MESSAGE_SECONDS)
        finally:
            self.tcp_open -= 1
            writer.close()

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
