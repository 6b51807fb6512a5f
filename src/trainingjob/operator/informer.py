"""One informer per watched resource (and namespace): LIST in pages, then WATCH from the list's resourceVersion.

client-go's reflector in small, on the raw JSON (no client model objects are built):
- the LIST is read in pages of `page_size` and trimmed page by page, so no full listing of raw objects is held;
- the WATCH asks for bookmarks, so a quiet resource still moves its resourceVersion and a reconnect rarely needs a
  re-list; it ends after `watch_timeout` seconds and resumes from the last resourceVersion;
- 410 Gone (the resourceVersion was compacted away) means a re-list, whose diff against the store turns objects
  deleted during the gap into deletes (Kopf kept them forever);
- any other error backs off (1 s doubling to 30 s, with jitter) and resumes.
`synced` is set once the first LIST is in the store: the operator plans nothing before every informer is synced.
`last_contact` (monotonic) moves with every page, event, bookmark and reconnect; /healthz reads it.

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
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp

from trainingjob.operator.store import Contribution, ObjectKey, ResourceStore, Touched, object_key

logger = logging.getLogger(__name__)
PAGE_SIZE = 500
WATCH_TIMEOUT_SECONDS = 240
REQUEST_TIMEOUT_SECONDS = 60.0
BACKOFF_BASE = 1.0
BACKOFF_MAX = 30.0


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str

    def path(self, namespace: str | None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}/{self.version}"


class Gone(Exception):
    """410: the resourceVersion to resume from (or a list's continue token) is too old; list again."""


class ApiError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


def backoff_delay(failures: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds before the next attempt after `failures` in a row: 1, 2, 4, … 30, each with ±20 % jitter (many
    informers cut at once by an API server restart do not come back in lockstep)."""
    base = min(BACKOFF_BASE * 2 ** max(failures - 1, 0), BACKOFF_MAX)
    return base * (0.8 + 0.4 * rand())


class Informer:
    """Keeps `store` equal to the API server's objects of `resource` matching `label_selector` in `namespace`
    (None: all namespaces); calls `on_change(touched)` with the (index, key) pairs every change moved."""

    def __init__(
        self,
        api: Any,
        resource: Resource,
        namespace: str | None,
        label_selector: str,
        store: ResourceStore,
        on_change: Callable[[Touched], None],
        page_size: int = PAGE_SIZE,
        watch_timeout: int = WATCH_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api  # a kubernetes_asyncio ApiClient (its configuration and credentials)
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.store = store
        self.on_change = on_change
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.clock = clock
        self.synced = asyncio.Event()
        self.last_contact = clock()
        self.resource_version: str | None = None
        self.relists = 0
        self.failures = 0

    @property
    def name(self) -> str:
        return f"{self.resource} in {self.namespace or 'all namespaces'}"

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
            except Exception as error:  # every failure is retried; none may end the informer
                self.failures += 1
                delay = backoff_delay(self.failures)
                if isinstance(error, ApiError) and error.status == 404:
                    self.not_served()
                else:
                    logger.warning("%s: %s; retrying in %.1fs", self.name, describe(error), delay)
                await asyncio.sleep(delay)

    def not_served(self) -> None:
        """404: the resource is not served (its CRD is not installed, or was deleted). Nothing of it exists, which
        an empty store says; jobs of the other resources must not wait behind it. Listed again until served."""
        if not self.synced.is_set() or len(self.store):
            logger.warning("%s is not served (is its CRD installed?); nothing of it is cached", self.name)
        self.resource_version = None
        touched = self.store.replace({})
        self.synced.set()
        if touched:
            self.on_change(touched)

    async def list(self) -> str:
        """Read every matching object, page by page, replace the store with it; the listing's resourceVersion."""
        contributions: dict[ObjectKey, Contribution] = {}
        token, started = "", self.clock()
        while True:
            params = {"labelSelector": self.label_selector, "limit": str(self.page_size)}
            if token:
                params["continue"] = token
            body = await self.request(params, REQUEST_TIMEOUT_SECONDS)
            with collector_paused():
                metadata = self.file_page(body, contributions)
            token = metadata.get("continue") or ""
            self.last_contact = self.clock()
            if not token:
                break
        touched = self.store.replace(contributions)
        logger.info("%s: listed %d object(s) in %.1fs", self.name, len(contributions), self.clock() - started)
        if self.synced.is_set():
            self.relists += 1
        self.synced.set()
        if touched:
            self.on_change(touched)
        return str(metadata.get("resourceVersion") or "")

    def file_page(self, body: bytes, contributions: dict[ObjectKey, Contribution]) -> Mapping[str, Any]:
        """Parse one page and keep only what the indexes take of each object; the page's list metadata."""
        page = json.loads(body)
        for item in page.get("items") or []:
            contributions[object_key(item)] = self.store.contribution(item)
        return page.get("metadata") or {}

    async def request(self, params: Mapping[str, str], seconds: float) -> bytes:
        """The body of one successful GET, unparsed."""
        response = await self.call(params, aiohttp.ClientTimeout(total=seconds, sock_connect=10))
        try:
            body = await response.read()
            check_status(response.status, body)
            return body
        finally:
            response.release()

    async def watch(self, resource_version: str) -> str:
        """Apply watch events until the server ends the watch; the resourceVersion to resume from."""
        params = {
            "labelSelector": self.label_selector,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(self.watch_timeout),
        }
        # No total bound: the server ends the watch; a connection silent for longer than that is dead.
        response = await self.call(params, aiohttp.ClientTimeout(sock_connect=10, sock_read=self.watch_timeout + 30))
        try:
            if response.status != 200:
                check_status(response.status, await response.read())
            self.last_contact = self.clock()
            while True:
                line = await response.content.readline()
                if not line:
                    return resource_version
                if line.strip():
                    resource_version = self.apply_event(json.loads(line), resource_version)
        finally:
            response.release()

    def apply_event(self, event: Mapping[str, Any], resource_version: str) -> str:
        """One watch event into the store; the resourceVersion to resume from after it."""
        self.last_contact = self.clock()
        kind, body = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = int(body.get("code") or 0)
            if code == 410:
                raise Gone(body.get("message") or "expired")
            raise ApiError(code, str(body.get("message") or body))
        version = str((body.get("metadata") or {}).get("resourceVersion") or resource_version)
        if kind == "BOOKMARK":
            return version
        touched = self.store.delete(body) if kind == "DELETED" else self.store.upsert(body)
        if touched:
            self.on_change(touched)
        return version

    async def call(self, params: Mapping[str, str], bounds: aiohttp.ClientTimeout) -> Any:
        """GET the resource's collection with the client's credentials; the unread aiohttp response."""
        return await self.api.call_api(
            self.resource.path(self.namespace),
            "GET",
            query_params=list(params.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=bounds,
        )


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
        try:
            detail = str(json.loads(body).get("message"))
        except (ValueError, AttributeError):
            detail = body[:200].decode(errors="replace")
        raise ApiError(status, detail)


def describe(error: BaseException) -> str:
    return str(error) or type(error).__name__
