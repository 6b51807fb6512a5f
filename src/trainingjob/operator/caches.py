"""Every informer of the operator, the indexes they fill, and the one "all caches synced" barrier.

One informer per watched resource and namespace (or one per resource for all namespaces); informers of one resource
share its indexes. Changes are routed to the work queue as job or model keys by `on_change`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from trainingjob.operator.informer import Informer
from trainingjob.operator.store import Index, ResourceStore, Touched
from trainingjob.operator.watches import Watch

# Indexes keyed by an LLMModel: their changes enqueue the model; `models_by_source` only answers lookups.
MODEL_KEYED = frozenset({"llmmodel_bodies", "model_deployments", "model_services", "model_autoscalers"})
LOOKUP_ONLY = frozenset({"models_by_source"})


class Caches:
    def __init__(
        self,
        api: object,
        watches: Sequence[Watch],
        namespaces: Sequence[str],
        watch_timeout: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.indexes: dict[str, Index] = {
            name: Index() for watch in watches for name in [*watch.indexes, *watch.departures]
        }
        self.clock = clock
        self.on_change: Callable[[Touched], None] = lambda touched: None
        self.informers = [
            Informer(
                api,
                watch.resource,
                namespace,
                watch.label_selector,
                ResourceStore(self.indexes, watch.indexes, watch.departures),
                self._changed,
                watch_timeout=watch_timeout,
                clock=clock,
            )
            for watch in watches
            for namespace in (list(namespaces) or [None])
        ]
        self.tasks: list[asyncio.Task] = []

    def _changed(self, touched: Touched) -> None:
        self.on_change(touched)

    def start(self) -> None:
        self.tasks = [asyncio.create_task(i.run(), name=f"informer {i.name}") for i in self.informers]

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers))

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def stalled(self, bound: float) -> list[str]:
        """Informers that have heard nothing from the API server for over `bound` seconds (a live watch hears at
        least a bookmark or its own end well within it), and informers whose task died."""
        now = self.clock()
        late = [
            f"{i.name} (silent {now - i.last_contact:.0f}s)" for i in self.informers if now - i.last_contact > bound
        ]
        dead = [task.get_name() for task in self.tasks if task.done()]
        return late + [f"{name} (stopped)" for name in dead]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def route(touched: Touched, enqueue: Callable[[tuple], None], models_of_job: Callable[[str, str], list]) -> None:
    """Turn changed (index, key) pairs into work: the job or model the key names; a job's change also reaches the
    models waiting for it (a model serves its source job's checkpoints once the job succeeds)."""
    from trainingjob.operator.serving import model_key

    for index, key in touched:
        if index in LOOKUP_ONLY:
            continue
        if index in MODEL_KEYED:
            enqueue(model_key(*key))
            continue
        enqueue(key)
        if index == "trainingjob_bodies":
            for model in models_of_job(*key):
                enqueue(model)
