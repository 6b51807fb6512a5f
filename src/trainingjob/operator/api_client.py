"""The reconciler's Kubernetes client, counting every request by verb, resource and response code.

Counting at the client (not at each call site) covers every write and read the operator makes through it, the
informers' lists and watches included (they use a second instance with its own connection pool).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

# Every request of the operator's client ends within this many seconds unless its caller asks otherwise (aiohttp's
# own default is five minutes): a hung API call fails like any other error and the reconcile is retried with
# backoff, instead of holding a worker (and, on the leader, the jobs behind it) silently.
REQUEST_TIMEOUT_SECONDS = 30.0

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get"}


def resource_of(url: str) -> str:
    """/api/v1/namespaces/ns/pods/name/log -> pods/log; /apis/g/v/tokenreviews -> tokenreviews."""
    parts = [p for p in urlparse(url).path.split("/") if p]
    start = 2 if parts[:1] == ["api"] else 3
    rest = parts[start:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:] or ["namespaces"]
    if not rest:
        return "unknown"
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NETRC")


def needs_environment() -> bool:
    """Whether the environment configures a proxy or netrc credentials the client must honour."""
    return any(os.environ.get(name) for name in PROXY_VARIABLES) or (Path.home() / ".netrc").exists()


class CountingApiClient(client.ApiClient):
    def __init__(
        self,
        on_request: Callable[[str, str, int], None],
        *args: Any,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.on_request = on_request
        self.request_timeout = request_timeout
        # kubernetes_asyncio always creates its session with trust_env=True, so aiohttp looks up proxy variables
        # and ~/.netrc, in a thread, for every request: measurable CPU and latency at thousands of creates.
        # Only where neither is configured (as in a cluster) is that lookup skipped.
        session = self.rest_client.pool_manager
        if not needs_environment() and hasattr(session, "_trust_env"):
            session._trust_env = False

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        verb, resource = VERBS.get(method, method.lower()), resource_of(url)
        if not kwargs.get("_request_timeout"):
            kwargs["_request_timeout"] = self.request_timeout
        try:
            response = await super().request(method, url, *args, **kwargs)
        except ApiException as error:
            self.on_request(verb, resource, error.status or 0)
            raise
        self.on_request(verb, resource, getattr(response, "status", 200))
        return response
