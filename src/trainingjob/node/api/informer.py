"""The objects of one kind the agent follows (its pods, every Service and EndpointSlice), kept up with the API server
by the shared watch loop (kube/reflector.py), calling back on every change.

After a watch gap the reflector lists again and this store diffs itself against the listing, so an object deleted
during the gap produces a delete. `synced` is set after the first list, for the agent's recovery step, which must
see every pod bound to the node before deciding which local state is orphaned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainingjob.kube.reflector import ObjectKey, Reflector, object_key
from trainingjob.node.api.client import Api

Handler = Callable[[str, dict[str, Any]], None]
WATCH_SECONDS = 300


class Informer:
    """`store` holds the objects at `path` matching `field_selector`, whole; `on_event(kind, object)` hears of
    every change (ADDED, MODIFIED, DELETED), a re-list's differences included."""

    def __init__(self, api: Api, path: str, on_event: Handler, what: str, field_selector: str = "") -> None:
        self.on_event = on_event
        self.what = what
        self.store: dict[ObjectKey, dict[str, Any]] = {}
        self.reflector = Reflector(api, path, self, what, field_selector=field_selector, watch_timeout=WATCH_SECONDS)
        self.synced = self.reflector.synced

    async def run(self) -> None:
        await self.reflector.run()

    # The reflector's sink.

    def file(self, body: Any) -> dict[str, Any]:
        return body  # whole: the agent reads pods, services and slices as they are

    def replace(self, filed: dict[ObjectKey, dict[str, Any]]) -> None:
        for key in [key for key in self.store if key not in filed]:
            self.on_event("DELETED", self.store.pop(key))
        for key, item in filed.items():
            previous = self.store.get(key)
            self.store[key] = item
            if previous is None:
                self.on_event("ADDED", item)
            elif previous["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                self.on_event("MODIFIED", item)

    def apply(self, kind: str, body: Any) -> None:
        if kind == "DELETED":
            self.store.pop(object_key(body), None)
        else:
            self.store[object_key(body)] = body
        self.on_event(kind, body)
