"""Every informer of the operator, the indexes they fill, and the one "all caches synced" barrier.

One informer (a kube/reflector.py Reflector feeding a ResourceStore) per watched resource and namespace, or one per
resource for all namespaces; informers of one resource share its indexes. Changes are routed to the work queues as
job or model keys by `on_change`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainingjob.kube.crd_gate import wait_served
from trainingjob.kube.reflector import ApiClientTransport, Reflector, Resource, object_key
from trainingjob.operator.runtime.store import Index, Indexes, IndexFunction, ResourceStore, Touched


@dataclass(frozen=True)
class Watch:
    """One resource to watch, with a server-side label selector, and the indexes its objects feed."""

    resource: Resource
    label_selector: str
    indexes: Mapping[str, IndexFunction] = field(default_factory=dict)
    # Indexes of what objects looked like when deleted (store.py, departures).
    departures: Mapping[str, IndexFunction] = field(default_factory=dict)
    # A cluster-scoped resource has one informer, whatever namespaces the operator watches.
    cluster_scoped: bool = False
    # Not served (404), the informer waits on a watch of the resource's CRD instead of listing again with the
    # backoff (kube/crd_gate.py): for resources an optional component serves (Kueue). RBAC: list and watch of
    # that CRD, by name.
    gated: bool = False
    # What its controller writes of these objects stands in for the cached views until the cache shows it
    # (store.Index, stand_in below): for objects whose views hold only what the controller writes (a Service's
    # ports, a ConfigMap's data, a Workload before Kueue answers), not pods, whose status is the cluster's.
    stands_in: bool = False

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether the watch's label selector (equality terms, "k=v,k2=v2", as the operator writes them) takes an
        object with these labels: one it would not list must not stand in, no event would settle it."""
        terms = [term.split("=", 1) for term in self.label_selector.split(",") if term]
        return all(len(term) == 2 and labels.get(term[0]) == term[1] for term in terms)


def stand_in(
    indexes: Indexes, watches: Iterable[Watch], namespace: str, manifest: Mapping[str, Any], created: bool
) -> None:
    """A controller wrote `manifest` (created it, or replaced it whole): file what each index of the watch of its
    kind would make of it, as a stand-in until the cache shows it (store.Index). Indexes that are not the
    informers' (a unit test's plain dicts) and watches without `stands_in` take nothing."""
    metadata = manifest.get("metadata") or {}
    body = {**manifest, "metadata": {**metadata, "namespace": namespace}}
    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    for watch in watches:
        resource = watch.resource
        if not watch.stands_in or (resource.kind, resource.api_version) != (kind, api_version):
            continue
        if not watch.selects(metadata.get("labels") or {}):
            continue
        for name, function in watch.indexes.items():
            index, entry = indexes.get(name), function(body)
            if isinstance(index, Index) and entry is not None:
                index.stand_in(entry[0], object_key(body), entry[1], created)


def merged(watches: Iterable[Watch]) -> tuple[Watch, ...]:
    """One watch per resource and label selector, with the indexes of every watch of it: two controllers that
    read Services get one Service informer (one listing, one copy of each object's views per index)."""
    by_source: dict[tuple[Resource, str], Watch] = {}
    for watch in watches:
        source = (watch.resource, watch.label_selector)
        known = by_source.get(source)
        if known is None:
            by_source[source] = watch
            continue
        for name in set(known.indexes) & set(watch.indexes):
            assert known.indexes[name] is watch.indexes[name], f"index {name} registered twice, differently"
        by_source[source] = dataclasses.replace(
            watch,
            indexes={**known.indexes, **watch.indexes},
            departures={**known.departures, **watch.departures},
            gated=watch.gated or known.gated,
            stands_in=known.stands_in or watch.stands_in,
        )
    return tuple(by_source.values())


class Caches:
    def __init__(
        self,
        api: object,
        watches: Sequence[Watch],
        namespaces: Sequence[str],
        watch_timeout: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.indexes = {name: Index() for watch in watches for name in [*watch.indexes, *watch.departures]}
        self.namespaces = tuple(namespaces)
        self.clock = clock
        self.on_change: Callable[[Touched], None] = lambda touched: None
        transport = ApiClientTransport(api)
        self.stores: list[ResourceStore] = []
        self.informers: list[Reflector] = []
        for watch in watches:
            for namespace in [None] if watch.cluster_scoped else list(namespaces) or [None]:
                store = ResourceStore(self.indexes, watch.indexes, watch.departures, self._changed)
                self.stores.append(store)
                self.informers.append(
                    Reflector(
                        transport,
                        watch.resource.path(namespace),
                        store,
                        f"{watch.resource} in {namespace or 'all namespaces'}",
                        label_selector=watch.label_selector,
                        watch_timeout=watch_timeout,
                        clock=clock,
                        not_served_is_empty=True,
                        until_served=functools.partial(wait_served, transport, watch.resource) if watch.gated else None,
                    )
                )
        self.tasks: list[asyncio.Task] = []

    def _changed(self, touched: Touched) -> None:
        self.on_change(touched)

    def start(self) -> None:
        self.tasks = [asyncio.create_task(i.run(), name=f"informer {i.name}") for i in self.informers]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers))

    def serves(self, resource: Resource) -> bool:
        """Whether the API server serves `resource` (its latest listing succeeded): a CRD installed after the
        operator started is listed, and so served, once its informer's retry finds it."""
        paths = {resource.path(None), *(resource.path(ns) for ns in self.namespaces)}
        return any(informer.served for informer in self.informers if informer.path in paths)

    def object_count(self) -> int:
        return sum(len(store) for store in self.stores)

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def stalled(self, bound: float) -> list[str]:
        """Informers that have waited for the API server for over `bound` seconds (a live watch hears at least a
        bookmark or its own end well within it; one backing off after a failure is not waiting), and informers whose
        task died."""
        now = self.clock()
        silent = {informer.name: informer.silent_seconds(now) for informer in self.informers}
        late = [f"{name} (silent {seconds:.0f}s)" for name, seconds in silent.items() if seconds > bound]
        dead = [task.get_name() for task in self.tasks if task.done()]
        return late + [f"{name} (stopped)" for name in dead]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
