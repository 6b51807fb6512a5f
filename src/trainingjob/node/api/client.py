"""A small JSON client of the Kubernetes API for the node agent, with the node's own client certificate.

Why not kubernetes_asyncio: the agent needs a dozen plain requests and three watches, on dicts; model classes
would be converted back to dicts at every step. Every call has a timeout; errors carry the API's Status.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from trainingjob.user_agent import NODE_AGENT, user_agent

CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
REQUEST_TIMEOUT = 30.0


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any] | None, text: str = "") -> None:
        self.status = status
        self.body = body or {}
        self.reason = self.body.get("reason", "")
        super().__init__(f"HTTP {status}: {self.body.get('message') or text[:300]}")


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_file: str
    cert_file: str
    key_file: str


def ssl_context(credentials: Credentials) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=credentials.ca_file)
    context.load_cert_chain(credentials.cert_file, credentials.key_file)
    return context


AGENT = user_agent(NODE_AGENT)


class Api:
    def __init__(self, credentials: Credentials) -> None:
        self.server = credentials.server.rstrip("/")
        connector = aiohttp.TCPConnector(ssl=ssl_context(credentials), limit=32)
        # The User-Agent names the agent in audit logs and as field manager (trainingjob/user_agent.py).
        headers = {"User-Agent": AGENT}
        self.session = aiohttp.ClientSession(connector=connector, trust_env=False, headers=headers)

    async def close(self) -> None:
        await self.session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        content_type: str = "application/json",
        seconds: float = REQUEST_TIMEOUT,
    ) -> dict[str, Any]:
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self.session.request(
            method,
            self.server + path,
            data=data,
            params=_params(params),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=seconds),
        ) as response:
            text = await response.text()
            if response.status >= 400:
                raise ApiError(response.status, _json_or_none(text), text)
            return json.loads(text) if text else {}

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        return await self.request("PATCH", path, body, content_type=CONTENT_TYPES[kind])

    async def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, body)

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body)

    async def stream(self, path: str, params: Mapping[str, str], bounds: aiohttp.ClientTimeout) -> Any:
        """An unread GET response, for the shared watch loop (kube/reflector.py), which reads and releases it."""
        headers = {"Accept": "application/json"}
        return await self.session.get(self.server + path, params=_params(dict(params)), headers=headers, timeout=bounds)


def _params(params: dict[str, Any] | None) -> dict[str, str] | None:
    if not params:
        return None
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in params.items() if v is not None}


def _json_or_none(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
