"""One LIST+WATCH of TrainingJobs with the user's credentials feeding the JobStore, for as long as the UI runs.

Scope: every namespace when the user may list them all, else the namespaces given (or the kubeconfig context's),
so a user with rights in one namespace sees that namespace rather than an error. Watches resume from the last
resourceVersion (bookmarks included); an expired version (410) or any error leads to a fresh LIST that is diffed
against the store, after a backoff, with the reason shown in the UI meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.cli.kube import raise_for_status
from trainingjob.kube.status import api_message
from trainingjob.ui.store import JobStore

log = logging.getLogger(__name__)
WATCH_SECONDS = 290
LIST_TIMEOUT = aiohttp.ClientTimeout(total=60)
BACKOFF_MAX = 30.0


class WatchExpired(Exception):
    """The resourceVersion is too old (410 Gone): list again."""


def describe_error(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason or ''}: {api_message(error)}".strip()
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def watch_all(watches: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the watches of a scope together; the first to fail stops the others and its error is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            for watch in watches:
                group.create_task(watch)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None


async def lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """Non-empty lines of a streamed body, however long (aiohttp's line iterator caps them at 64 KiB)."""
    buffer = b""
    while chunk := await response.content.readany():
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for line in complete:
            if line.strip():
                yield line


class JobWatcher:
    def __init__(self, api: client.ApiClient, store: JobStore, namespaces: list[str] | None, fallback: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.store = store
        self.requested = namespaces  # None: all namespaces, falling back to `fallback` when that is forbidden
        self.fallback = fallback

    async def run(self) -> None:
        scope = self.requested
        backoff = 1.0
        while True:
            try:
                versions = await self._list(scope)
                self.store.set_problem(None)
                backoff = 1.0
                await watch_all(self._watch(namespace, version) for namespace, version in versions.items())
            except WatchExpired:
                continue
            except ApiException as error:
                if error.status == 403 and scope is None:
                    log.info("listing TrainingJobs in all namespaces is forbidden; watching %s", self.fallback)
                    scope = [self.fallback]
                    self.store.fallback = True
                    continue
                self.store.set_problem(f"watching TrainingJobs failed: {describe_error(error)}")
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                self.store.set_problem(f"cannot reach the API server: {describe_error(error)}")
            await asyncio.sleep(backoff)
            backoff = min(BACKOFF_MAX, backoff * 2)

    async def _list(self, scope: list[str] | None) -> dict[str | None, str]:
        """List the scope, replace the store's content, return the resourceVersion to watch each list from."""
        jobs: list[dict[str, Any]] = []
        versions: dict[str | None, str] = {}
        for namespace in scope or [None]:
            if namespace is None:
                listing = await self.custom.list_cluster_custom_object(
                    k.GROUP, k.VERSION, k.PLURAL, _request_timeout=LIST_TIMEOUT
                )
            else:
                listing = await self.custom.list_namespaced_custom_object(
                    k.GROUP, k.VERSION, namespace, k.PLURAL, _request_timeout=LIST_TIMEOUT
                )
            jobs.extend(listing.get("items") or [])
            versions[namespace] = listing["metadata"]["resourceVersion"]
        self.store.replace_all(jobs, scope)
        return versions

    async def _watch(self, namespace: str | None, version: str) -> None:
        """Apply watch events until an error or expiry (raised), resuming after each server-side timeout."""
        while True:
            async for kind, job in self._events(namespace, version):
                version = (job.get("metadata") or {}).get("resourceVersion") or version
                if kind in ("ADDED", "MODIFIED"):
                    self.store.upsert(job)
                elif kind == "DELETED":
                    self.store.delete(job)

    async def _events(self, namespace: str | None, version: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        arguments: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "resource_version": version,
            "timeout_seconds": WATCH_SECONDS,
            "_preload_content": False,
            "_request_timeout": aiohttp.ClientTimeout(sock_connect=10, sock_read=WATCH_SECONDS + 60),
        }
        if namespace is None:
            response = await self.custom.list_cluster_custom_object(k.GROUP, k.VERSION, k.PLURAL, **arguments)
        else:
            response = await self.custom.list_namespaced_custom_object(
                k.GROUP, k.VERSION, namespace, k.PLURAL, **arguments
            )
        try:
            await raise_for_status(response)
            async for line in lines(response):
                event = json.loads(line)
                kind, body = event.get("type", ""), event.get("object") or {}
                if kind == "ERROR":
                    if body.get("code") == 410:
                        raise WatchExpired()
                    error = ApiException(status=body.get("code") or 500, reason=body.get("reason"))
                    error.body = json.dumps(body)
                    raise error
                yield kind, body
        except ApiException as error:
            if error.status == 410:
                raise WatchExpired() from None
            raise
        finally:
            response.release()
