"""Reads of objects outside a job that the planner needs now and then: a namespace's PodSecurity level, the
readiness of a node holding a pod stuck Terminating, and a namespace's ResourceQuotas while a job has workers to
create.

Why reads with a short cache, not watches: each is needed rarely (a namespace once per few minutes however many
jobs it holds; a node only while a pod on it is stuck; quotas only while workers wait to be created), and a read
needs only `get` (or `list` in one namespace), which a Role in a watched namespace can grant for that namespace; a
watch of all namespaces, nodes or quotas would need cluster-wide list and watch and would keep every one of them in
memory. Every lookup is bounded in time and
concurrent lookups of one key share one request.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from trainingjob.kube.ttl_cache import TtlCache
from trainingjob.reconcile.surroundings import NodeView, enforces_restricted, node_view
from trainingjob.scheduling.quota import QUOTA_TTL, NamespaceQuotas, container_defaults

logger = logging.getLogger(__name__)
V = TypeVar("V")
NAMESPACE_TTL = 120.0
NODE_TTL = 15.0
MAX_ENTRIES = 10_000
REQUEST_TIMEOUT = 10


async def read_json(call: Callable[..., Awaitable[Any]], *args: Any) -> tuple[int, dict[str, Any] | None]:
    """(HTTP status, body) of a read, without building the client's model objects."""
    response = await call(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
    data = await response.read()
    return response.status, (json.loads(data) if 200 <= response.status <= 299 else None)


class Lookups:
    """Namespace PodSecurity levels and node readiness, cached; `core` is a CoreV1Api."""

    def __init__(self, core: Any, clock=time.monotonic) -> None:
        self.core = core
        self.namespaces: TtlCache[bool] = TtlCache(self._namespace_restricted, NAMESPACE_TTL, clock=clock)
        self.nodes: TtlCache[NodeView | None] = TtlCache(self._node, NODE_TTL, clock=clock)
        self.quotas: TtlCache[NamespaceQuotas] = TtlCache(self._quotas, QUOTA_TTL, clock=clock)
        self.warned: set[str] = set()

    async def namespace_restricted(self, namespace: str) -> bool:
        return await self.namespaces.get(namespace)

    def learn_restricted(self, namespace: str) -> None:
        """PodSecurity refused a pod without runAsNonRoot here although the label does not say `restricted` (a
        cluster-wide default of the admission plugin): build this namespace's pods as `restricted` for a while."""
        logger.info(
            "namespace %s enforces PodSecurity restricted (admission said so); workers get runAsNonRoot", namespace
        )
        self.namespaces.put(namespace, True)

    async def node_views(self, names: Iterable[str]) -> dict[str, NodeView]:
        views = {name: await self.nodes.get(name) for name in sorted(set(names)) if name}
        return {name: view for name, view in views.items() if view is not None}

    async def _namespace_restricted(self, namespace: str) -> bool:
        try:
            status, body = await read_json(self.core.read_namespace, namespace)
        except Exception as error:  # a failed lookup must never fail a reconcile: the answer is "unknown"
            self._warn_once(f"namespace {namespace}", f"cannot read namespace {namespace}: {error!r}")
            return False
        if body is None:
            self._warn_once(
                f"namespace {namespace}",
                f"cannot read namespace {namespace} (HTTP {status}): its PodSecurity level is unknown, so workers "
                "get runAsNonRoot only after PodSecurity refuses a pod without it",
            )
        return enforces_restricted(body)

    async def resource_quotas(self, namespace: str) -> NamespaceQuotas:
        return await self.quotas.get(namespace)

    async def _quotas(self, namespace: str) -> NamespaceQuotas:
        """The namespace's ResourceQuotas and, when it has any, its LimitRanges' container defaults (they fill what
        a worker leaves unset before quota counts it); none known when they cannot be read (admission still
        enforces them)."""
        quotas = await self._items(self.core.list_namespaced_resource_quota, namespace, "ResourceQuotas")
        if not quotas:
            return NamespaceQuotas()
        ranges = await self._items(self.core.list_namespaced_limit_range, namespace, "LimitRanges")
        return NamespaceQuotas(tuple(quotas), tuple(container_defaults(ranges)))

    async def _items(self, call: Callable[..., Awaitable[Any]], namespace: str, kind: str) -> list[dict[str, Any]]:
        try:
            status, body = await read_json(call, namespace)
        except Exception as error:  # a failed lookup must never fail a reconcile: the answer is "unknown"
            self._warn_once(f"{kind} {namespace}", f"cannot list {kind} in {namespace}: {error!r}")
            return []
        if body is None:
            self._warn_once(
                f"{kind} {namespace}",
                f"cannot list {kind} in {namespace} (HTTP {status}): gangs are created without checking quota "
                "first, and admission refusing part of one makes it give back what it got",
            )
            return []
        return list(body.get("items") or [])

    async def _node(self, name: str) -> NodeView | None:
        try:
            status, body = await read_json(self.core.read_node, name)
        except Exception as error:  # a failed lookup must never fail a reconcile: the answer is "unknown"
            self._warn_once(f"node {name}", f"cannot read node {name}: {error!r}")
            return None
        if status == 404:
            return node_view(name, None)
        if body is None:
            self._warn_once("nodes", f"cannot read node {name} (HTTP {status}): stuck pods are reported, never forced")
            return None
        return node_view(name, body)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self.warned and len(self.warned) < MAX_ENTRIES:
            self.warned.add(key)
            logger.warning("%s", message)
