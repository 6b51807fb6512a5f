"""A thin aiohttp client for the API server: create, list, watch — raw JSON, no model classes.

Why not kubernetes_asyncio here: the harness watches every pod of every contender (tens of thousands of events on
2 cores shared with the API server); turning each into model objects would cost more CPU than the operators we
measure. Auth is the admin client certificate (harness) or a ServiceAccount token (the raw-limit client).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import yaml

WATCH_QUIET_S = 150.0  # no byte for this long on a watch with bookmarks: the stream is stalled
WATCH_RETRY_S = 1.0
GET_RETRIES = 60


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class Api:
    def __init__(self, server: str, ca_file: str, cert: tuple[str, str] | None = None, token: str | None = None):
        context = ssl.create_default_context(cafile=ca_file)
        if cert is not None:
            context.load_cert_chain(*cert)
        self.server = server.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One connection per concurrent request, like client-go's HTTP/1.1 transport with a high MaxIdleConns.
        connector = aiohttp.TCPConnector(ssl=context, limit=256)
        self.session = aiohttp.ClientSession(connector=connector, headers=headers)

    @classmethod
    def from_kubeconfig(cls, path: str) -> Api:
        """Enough of kubeconfig for our clusters: one server, a CA file, and a client cert or a token."""
        with open(path) as file:
            config = yaml.safe_load(file)
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        cert = (user["client-certificate"], user["client-key"]) if "client-certificate" in user else None
        return cls(cluster["server"], cluster["certificate-authority"], cert=cert, token=user.get("token"))

    async def close(self) -> None:
        await self.session.close()

    async def create(self, path: str, body: dict[str, Any]) -> int:
        """POST; returns the status (409 AlreadyExists is returned, not raised: creators retry safely)."""
        async with self.session.post(self.server + path, json=body) as response:
            if response.status >= 300 and response.status != 409:
                raise ApiError(response.status, await response.text())
            await response.read()
            return response.status

    async def get(self, path: str) -> dict[str, Any]:
        """GET, waiting out 429 as the server asks: right after a CRD is installed or the API server starts, a LIST
        meets "storage is (re)initializing" (Retry-After 1) until the resource's watch cache is ready; the steady
        run's harness once died of it at its first LIST."""
        for _ in range(GET_RETRIES):
            async with self.session.get(self.server + path) as response:
                if response.status == 429:
                    await asyncio.sleep(float(response.headers.get("Retry-After") or 1))
                    continue
                if response.status >= 300:
                    raise ApiError(response.status, await response.text())
                return await response.json()
        raise ApiError(429, f"still TooManyRequests after {GET_RETRIES} tries: {path}")

    async def get_text(self, path: str) -> str:
        """GET a plain-text endpoint (the API server's /metrics)."""
        async with self.session.get(self.server + path) as response:
            if response.status >= 300:
                raise ApiError(response.status, await response.text())
            return await response.text()

    async def watch(self, path: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Every object under `path` as ("ADDED", obj) from a list, then its watch events, forever.

        Re-watches from the last resourceVersion when the server ends a watch or the connection breaks or goes
        quiet for longer than WATCH_QUIET_S (the server sends a bookmark about every minute), and re-lists on 410
        Gone. A harness whose watch died or stalled waited out its run's whole timeout, and said nothing.
        """
        resource_version = None
        while True:
            if resource_version is None:
                listing = await self.get(path)
                resource_version = listing["metadata"]["resourceVersion"]
                for item in listing.get("items", []):
                    yield "ADDED", item
            query = f"?watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}&timeoutSeconds=600"
            timeout = aiohttp.ClientTimeout(total=None, sock_read=WATCH_QUIET_S)
            try:
                async with self.session.get(self.server + path + query, timeout=timeout) as response:
                    if response.status == 410:
                        resource_version = None
                        continue
                    if response.status >= 300:
                        raise ApiError(response.status, await response.text())
                    async for line in response.content:
                        event = json.loads(line)
                        kind, obj = event["type"], event["object"]
                        if kind == "ERROR":
                            resource_version = None if obj.get("code") == 410 else resource_version
                            break
                        resource_version = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            yield kind, obj
            except (aiohttp.ClientError, TimeoutError, ValueError):
                await asyncio.sleep(WATCH_RETRY_S)  # a broken, cut or quiet stream: watch again from where it was


async def create_all(api: Api, requests: Iterable[tuple[str, dict[str, Any]]], concurrency: int) -> int:
    """Create everything as fast as `concurrency` parallel requests allow; returns how many were created."""
    slots = asyncio.Semaphore(concurrency)

    async def one(path: str, body: dict[str, Any]) -> int:
        async with slots:
            return await api.create(path, body)

    statuses = await asyncio.gather(*(one(path, body) for path, body in requests))
    return sum(1 for status in statuses if status < 300)
