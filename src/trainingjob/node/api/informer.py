"""LIST then WATCH one kind of object into a store, calling back on every change (client-go's informer, small).

On a watch that expired (410) or broke, it lists again and diffs the store against the list, so an object
deleted during the gap produces a delete. `synced` is set after the first list, for the agent's recovery step,
which must see every pod bound to the node before deciding which local state is orphaned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

from trainingjob.node.api.client import Api, ApiError, WatchExpired, sleep_backoff

log = logging.getLogger(__name__)
Handler = Callable[[str, dict[str, Any]], None]


def object_key(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


class Informer:
    def __init__(self, api: Api, path: str, params: dict[str, Any], on_event: Handler, what: str) -> None:
        self.api = api
        self.path = path
        self.params = params
        self.on_event = on_event
        self.what = what
        self.store: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()

    def _replace(self, items: list[dict[str, Any]]) -> None:
        fresh = {object_key(item): item for item in items}
        for key in list(self.store):
            if key not in fresh:
                self.on_event("DELETED", self.store.pop(key))
        for key, item in fresh.items():
            previous = self.store.get(key)
            self.store[key] = item
            if previous is None:
                self.on_event("ADDED", item)
            elif previous["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                self.on_event("MODIFIED", item)

    async def _list(self) -> str:
        listing = await self.api.get(self.path, **self.params)
        self._replace(listing.get("items") or [])
        self.synced.set()
        return listing["metadata"]["resourceVersion"]

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if kind == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self.on_event(kind, obj)

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                version = await self._list()
                failures = 0
                while True:
                    async for kind, obj in self.api.watch(self.path, {**self.params, "resourceVersion": version}):
                        version = obj.get("metadata", {}).get("resourceVersion") or version
                        if kind != "BOOKMARK":
                            self._apply(kind, obj)
            except WatchExpired:
                log.debug("watch of %s expired; listing again", self.what)
            except (ApiError, aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
                failures += 1
                log.warning("watch of %s failed (%s); retrying", self.what, error)
                await sleep_backoff(failures)
