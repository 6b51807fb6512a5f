"""LIST + WATCH of one resource into a sink: client-go's reflector in small, the one watch loop of every program.

The operator's caches, the node agent's pods, services and slices, the UI's job mirror and `tj get --watch` all
keep up with the API server through it, on the raw JSON (no client model objects are built):
- the LIST is read in pages of `page_size`, and the sink files each object as its page is parsed (the operator keeps
  a trimmed view), so no full listing of raw objects is held;
- the WATCH asks for bookmarks, so a quiet resource still moves its resourceVersion and a reconnect rarely needs a
  re-list; it ends after `watch_timeout` seconds and resumes from the last resourceVersion;
- 410 Gone (the resourceVersion was compacted away) means a re-list, which the sink diffs against what it holds, so
  objects deleted during the gap become deletes;
- any other error backs off (kube/backoff.py: 1 s doubling to 30 s, with jitter) and resumes.
`synced` is set once the first LIST is in the sink; `last_contact` (monotonic) moves with every page, event,
bookmark and reconnect, for liveness probes.

A page is parsed and filed with Python's cyclic garbage collector paused (`collector_paused`): parsing 500 pods
allocates ~10^6 containers that all stay alive until the page is filed, so the collector ran over and over, each
time over everything alive, and never found anything (raw JSON has no cycles). It was half of the listing's CPU
after a restart at 1000 x 8 (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.kube.backoff import watch_backoff
from trainingjob.kube.status import api_message

logger = logging.getLogger(__name__)
PAGE_SIZE = 500
WATCH_TIMEOUT_SECONDS = 240
REQUEST_TIMEOUT_SECONDS = 60.0
ObjectKey = tuple[str, str]  # (namespace, name) of a watched object


@dataclass(frozen=True)
class Resource:
    """A resource of the API (the `kind` of its objects where someone needs it: Events name it)."""

    group: str
    version: str
    plural: str
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}/{self.version}"


class Gone(Exception):
    """410: the resourceVersion to resume from (or a list's continue token) is too old; list again."""


class Transport(Protocol):
    """GETs a collection and hands back the unread aiohttp response (the reflector reads and releases it)."""

    async def stream(self, path: str, params: Mapping[str, str], bounds: aiohttp.ClientTimeout) -> Any: ...


class ApiClientTransport:
    """A Transport over a kubernetes_asyncio ApiClient: its server, credentials and connection pool."""

    def __init__(self, api: Any) -> None:
        self.api = api

    async def stream(self, path: str, params: Mapping[str, str], bounds: aiohttp.ClientTimeout) -> Any:
        return await self.api.call_api(
            path,
            "GET",
            query_params=list(params.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=bounds,
        )


class Sink(Protocol):
    """Where a reflector puts what it sees: each listed object filed (kept as the sink likes), then the whole
    listing at once (whatever the sink holds that the listing lacks is gone), then every watch event."""

    def file(self, body: Mapping[str, Any]) -> Any: ...

    def replace(self, filed: dict[ObjectKey, Any]) -> None: ...

    def apply(self, kind: str, body: Mapping[str, Any]) -> None: ...


def object_key(body: Mapping[str, Any]) -> ObjectKey:
    metadata = body.get("metadata") or {}
    return (metadata.get("namespace") or "", metadata.get("name") or "")


class Reflector:
    """Keeps `sink` equal to the API server's objects at `path` (a collection, namespaced or not) that match the
    selectors (`run`); without a sink, `events` alone follows one watch. `on_failure(error, delay)` hears of every
    failed request before the backoff (default: a log line); it may raise to end `run`. With
    `not_served_is_empty`, 404 (the resource is not served: its CRD is missing) counts as an empty listing, so that
    whoever waits for `synced` does not wait for a CRD that may never come."""

    def __init__(
        self,
        transport: Transport,
        path: str,
        sink: Sink | None,
        name: str,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = PAGE_SIZE,
        watch_timeout: int = WATCH_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        on_failure: Callable[[Exception, float], None] | None = None,
        not_served_is_empty: bool = False,
        until_served: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.transport = transport
        self.path = path
        self._sink = sink
        self.name = name
        self.selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.clock = clock
        self.on_failure = on_failure or self.log_failure
        self.not_served_is_empty = not_served_is_empty
        # After a 404: wait until the resource may be served (kube/crd_gate.py); True: list again at once.
        self.until_served = until_served
        self.synced = asyncio.Event()
        self.last_contact = clock()
        self.backing_off = False  # asleep between a failed request and the next, on purpose
        self.resource_version: str | None = None
        self.relists = 0
        self.failures = 0
        self.served = False  # the latest listing succeeded (a 404 after it is news worth a warning)

    async def run(self) -> None:
        """Until cancelled: list, watch, resume; re-list after 410; back off after errors."""
        while True:
            try:
                if self.resource_version is None:
                    self.resource_version = await self.list()
                    self.failures = 0
                self.resource_version = await self.watch(self.resource_version)
                self.failures = 0
            except Gone:
                logger.info("%s: resourceVersion too old; listing again", self.name)
                self.resource_version = None
            except asyncio.CancelledError:
                raise
            except Exception as error:  # every failure is retried; none may end the reflector
                self.failures += 1
                delay = watch_backoff(self.failures)
                if self.not_served_is_empty and isinstance(error, ApiException) and error.status == 404:
                    self.not_served()
                    if await self.wait_until_served():
                        continue
                else:
                    self.on_failure(error, delay)
                await self.back_off(delay)

    async def wait_until_served(self) -> bool:
        """Wait on `until_served` (not a stall: it counts as a backoff); True when the resource may be served now.
        A gate refused for good (403: no grant to watch its CRD) is dropped, and the backoff polls as before."""
        if self.until_served is None:
            return False
        self.backing_off = True
        try:
            return await self.until_served()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if isinstance(error, ApiException) and error.status == 403:
                logger.warning("%s: cannot watch its CRD (%s); listing it now and then instead", self.name,
                               describe(error))  # fmt: skip
                self.until_served = None
            else:
                self.on_failure(error, 0.0)
            return False
        finally:
            self.backing_off = False
            self.last_contact = max(self.last_contact, self.clock())

    async def back_off(self, delay: float) -> None:
        """Sleep `delay` seconds; the silence that counts (silent_seconds) starts again when the sleep ends."""
        self.backing_off = True
        try:
            await asyncio.sleep(delay)
        finally:
            self.backing_off = False
            self.last_contact = max(self.last_contact, self.clock())

    def silent_seconds(self, now: float) -> float:
        """How long the informer has waited for the API server (liveness probes bound it): 0 while it backs off on
        purpose, else the time since its last contact or the end of its last backoff. A backoff of up to 30 s is
        no hang, and an API server that refuses or is down is no reason to restart the operator; a request that
        hangs is."""
        return 0.0 if self.backing_off else max(0.0, now - self.last_contact)

    @property
    def sink(self) -> Sink:
        assert self._sink is not None, f"{self.name}: a reflector without a sink only follows events"
        return self._sink

    def log_failure(self, error: Exception, delay: float) -> None:
        logger.warning("%s: %s; retrying in %.1fs", self.name, describe(error), delay)

    def not_served(self) -> None:
        """404: nothing of the resource exists, which an empty sink says. Listed again until served. The API server
        answered, so the informer is not stalled: without moving `last_contact` an operator on a cluster without
        Kueue's CRDs failed its liveness probe once --reconcile-stuck-after passed, and was restarted for good."""
        if not self.synced.is_set() or self.served:
            logger.warning("%s is not served (is its CRD installed?); nothing of it is cached", self.name)
        self.last_contact = self.clock()
        self.resource_version, self.served = None, False
        self.sink.replace({})
        self.synced.set()

    async def list(self) -> str:
        """Read every matching object, page by page, into the sink; the listing's resourceVersion."""
        filed: dict[ObjectKey, Any] = {}
        token, started = "", self.clock()
        while True:
            params = {**self.query(), "limit": str(self.page_size)}
            if token:
                params["continue"] = token
            body = await self.request(params, REQUEST_TIMEOUT_SECONDS)
            with collector_paused():
                metadata = self.file_page(body, filed)
            token = metadata.get("continue") or ""
            self.last_contact = self.clock()
            if not token:
                break
        self.sink.replace(filed)
        logger.info("%s: listed %d object(s) in %.1fs", self.name, len(filed), self.clock() - started)
        if self.synced.is_set():
            self.relists += 1
        self.served = True
        self.synced.set()
        return str(metadata.get("resourceVersion") or "")

    def query(self) -> dict[str, str]:
        return {key: value for key, value in self.selectors.items() if value}

    def file_page(self, body: bytes, filed: dict[ObjectKey, Any]) -> Mapping[str, Any]:
        """Parse one page and file each object with the sink; the page's list metadata."""
        page = json.loads(body)
        for item in page.get("items") or []:
            filed[object_key(item)] = self.sink.file(item)
        return page.get("metadata") or {}

    async def request(self, params: Mapping[str, str], seconds: float) -> bytes:
        """The body of one successful GET, unparsed."""
        response = await self.transport.stream(self.path, params, aiohttp.ClientTimeout(total=seconds, sock_connect=10))
        try:
            body = await response.read()
            check_status(response.status, body)
            return body
        finally:
            response.release()

    async def watch(self, resource_version: str) -> str:
        """Put watch events into the sink until the server ends the watch; the resourceVersion to resume from."""
        async with aclosing(self.events(resource_version)) as events:
            async for kind, body in events:
                self.sink.apply(kind, body)
        return self.resource_version or resource_version

    async def events(self, resource_version: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(ADDED|MODIFIED|DELETED, object) of one watch from `resource_version` until the server ends it; bookmarks
        and events move `self.resource_version`. Raises Gone on 410, ApiException on any other refusal."""
        self.resource_version = resource_version
        params = {
            **self.query(),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(self.watch_timeout),
        }
        # No total bound: the server ends the watch; a connection silent for longer than that is dead.
        bounds = aiohttp.ClientTimeout(sock_connect=10, sock_read=self.watch_timeout + 30)
        response = await self.transport.stream(self.path, params, bounds)
        try:
            if response.status != 200:
                check_status(response.status, await response.read())
            self.last_contact = self.clock()
            async for line in lines(response.content):
                kind, body = self.event(json.loads(line))
                if kind != "BOOKMARK":
                    yield kind, body
        finally:
            response.release()

    def event(self, event: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """One watch event's type and object; raises what an ERROR event reports."""
        self.last_contact = self.clock()
        kind, body = event.get("type") or "", event.get("object") or {}
        if kind == "ERROR":
            code = int(body.get("code") or 0)
            if code == 410:
                raise Gone(body.get("message") or "expired")
            raise refusal(code, json.dumps(body).encode(), str(body.get("reason") or ""))
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion") or self.resource_version)
        return kind, body


async def lines(content: Any) -> AsyncIterator[bytes]:
    """Non-empty lines of a streamed body, however long (aiohttp's readline refuses lines over 128 KiB, and one
    watch event carries a whole object)."""
    pending = b""
    while chunk := await content.readany():
        if pending:
            chunk = pending + chunk
        *complete, pending = chunk.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a stretch of synchronous work (no await inside: nothing else runs
    meanwhile) that allocates many objects and frees them all, none in a cycle. Reference counting still frees them
    at once; the collector's allocation count falls back as they go, so no catch-up collection follows. Nested use
    leaves the collector to the outermost."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def check_status(status: int, body: bytes) -> None:
    if status == 410:
        raise Gone(body[:200].decode(errors="replace"))
    if not 200 <= status <= 299:
        raise refusal(status, body)


def refusal(status: int, body: bytes, reason: str = "") -> ApiException:
    """The ApiException the client itself raises for a refused request (what every caller already handles), with
    the API server's Status as its body."""
    error = ApiException(status=status, reason=reason or None)
    error.body = body.decode("utf-8", "replace")
    return error


def describe(error: BaseException) -> str:
    """An error in one line (an ApiException's own str() spans headers and body over many lines)."""
    if isinstance(error, ApiException):
        return f"HTTP {error.status}: {api_message(error)}"
    return str(error) or type(error).__name__
