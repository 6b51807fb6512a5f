"""The informers' in-memory caches: trimmed views of watched objects, grouped into indexes by job (or model) key.

Pure data structures, no I/O (a kube/reflector.py Reflector feeds each ResourceStore, its sink): an object
contributes at most one view to each index of its resource, and `replace` (a re-list) removes whatever the new
listing no longer holds, so an object deleted while the watch was cut leaves the cache as a delete. Every change
reports the index keys it touched, so only the jobs whose planner input moved are reconciled.

An index is named by an IndexName[V], V being the type of its views: `views(indexes, WORKER_PODS, key)` is typed
as a list of PodViews, and a misspelt name is an unknown constant rather than a KeyError at run time.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trainingjob.kube.reflector import ObjectKey, object_key

V = TypeVar("V")
# One index: a function from a raw object to (index key, view), None when the object does not belong there.
IndexFunction = Callable[[Mapping[str, Any]], "tuple[Hashable, Any] | None"]
Touched = list[tuple[str, Hashable]]  # (index name, index key) whose views changed


class IndexName(str, Generic[V]):
    """The name of an index whose views are of type V. A str, so it is its own dictionary key and log text."""

    __slots__ = ()


# At most this many departures are remembered per store; the oldest goes first.
DEPARTURES_KEPT = 1024
# How long a written view may stand in for the cached one at most (see Index): after that, one someone else changed
# (a slice edited by hand) is put right again, and one whose event never came (created and deleted again while the
# watch was cut) stops hiding that it is gone.
WRITTEN_TTL_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class StandIn:
    """A view a controller wrote, filed until the cache shows it: a create is shown by any event of the object, a
    replace only by the view written (an older event of the object may still be on its way)."""

    view: Any
    at: float
    created: bool


@dataclass(frozen=True)
class Contribution:
    """What one object put in the indexes: its resourceVersion and, per index, (key, view)."""

    resource_version: str
    entries: tuple[tuple[str, Hashable, Any], ...]


class Index(Mapping[Hashable, ValuesView], Generic[V]):
    """key -> the views filed under it (iterable); what the reconciler reads.

    `on_put(key, obj)`, when set, hears of every view filed as its event is applied, before any plan reads the
    index: the reconciler settles its expectations on it (runtime/expectations.py).

    Stand-ins (client-go's MutationCache, by view): what a controller wrote (informers.stand_in) is read in place
    of the cached view until the object's watch event shows it, or for at most WRITTEN_TTL_SECONDS. A plan made in
    between (a Workload's admission, a pod event, soon after a create) would otherwise create the object again and
    meet AlreadyExists, or write a slice again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.by_key: dict[Hashable, dict[ObjectKey, V]] = {}
        self.on_put: Callable[[Hashable, ObjectKey], None] | None = None
        self.clock = clock
        self.stand_ins: dict[Hashable, dict[ObjectKey, StandIn]] = {}
        self.filed: deque[tuple[float, Hashable, ObjectKey]] = deque()  # stand-ins in the order written

    def __getitem__(self, key: Hashable) -> ValuesView[V]:
        standing = self.stand_ins.get(key)
        if standing:
            now = self.clock()
            for obj in [obj for obj, stand_in in standing.items() if now - stand_in.at > WRITTEN_TTL_SECONDS]:
                self.settle(key, obj)
            standing = self.stand_ins.get(key)
        if standing:
            return {**self.by_key.get(key, {}), **{obj: stand_in.view for obj, stand_in in standing.items()}}.values()
        return self.by_key[key].values()

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.by_key.keys() | self.stand_ins.keys() if self.stand_ins else self.by_key)

    def __len__(self) -> int:
        return len(self.by_key.keys() | self.stand_ins.keys() if self.stand_ins else self.by_key)

    def put(self, key: Hashable, obj: ObjectKey, view: Any) -> None:
        self.by_key.setdefault(key, {})[obj] = view
        stand_in = self.stand_ins.get(key, {}).get(obj)
        if stand_in is not None and (stand_in.created or stand_in.view == view):
            self.settle(key, obj)
        if self.on_put is not None:
            self.on_put(key, obj)

    def remove(self, key: Hashable, obj: ObjectKey) -> None:
        self.settle(key, obj)  # gone from the cache after our write: the cache has moved past it
        views = self.by_key.get(key)
        if views is not None:
            views.pop(obj, None)
            if not views:
                del self.by_key[key]

    def stand_in(self, key: Hashable, obj: ObjectKey, view: Any, created: bool) -> None:
        """`view` was just written (`created`, or replaced): read it in place of the cached one until the cache
        shows it. Not filed when the cache shows it already: the write's event (and a newer one, a Workload
        admitted at once) may arrive before the write's answer, and a stand-in filed after them would hide them.
        Stand-ins whose time is over are dropped here too, read or not, so none outlives its job."""
        cached = self.by_key.get(key, {})
        if obj in cached and (created or cached[obj] == view):
            return
        now = self.clock()
        while self.filed and now - self.filed[0][0] > WRITTEN_TTL_SECONDS:
            at, old_key, old_obj = self.filed.popleft()
            old = self.stand_ins.get(old_key, {}).get(old_obj)
            if old is not None and old.at == at:
                self.settle(old_key, old_obj)
        self.stand_ins.setdefault(key, {})[obj] = StandIn(view, now, created)
        self.filed.append((now, key, obj))

    def settle(self, key: Hashable, obj: ObjectKey) -> None:
        standing = self.stand_ins.get(key)
        if standing is not None:
            standing.pop(obj, None)
            if not standing:
                del self.stand_ins[key]


Indexes = Mapping[str, Mapping[Hashable, Iterable[Any]]]  # index name -> key -> views (an Index, or a plain dict)


def views(indexes: Indexes, name: IndexName[V], key: Hashable) -> list[V]:
    """The views index `name` holds under `key` ([] when it holds none, or there is no such index), as a list the
    caller may keep: the typed read the controllers use."""
    index = indexes.get(name)
    found = index.get(key) if index is not None else None
    return list(found) if found is not None else []


class ResourceStore:
    """The objects one informer (one resource in one namespace, or in all) has seen, and their index entries: the
    sink of its Reflector, telling `on_change` the (index, key) pairs every change touched.

    `indexes` may be shared by several stores (one per watched namespace); each store prunes only its own objects.

    `departures` file what an object looked like when its watch said it was deleted: the final body is the only
    word of how it went (a pod the scheduler preempted carries DisruptionTarget), and a pod removed at once after
    being marked is often gone before anyone plans from the mark. A departure lasts until an object of the same
    name appears again, and at most DEPARTURES_KEPT of them are kept. A re-list records none: it has no final body.
    """

    def __init__(
        self,
        indexes: Mapping[str, Index],
        functions: Mapping[str, IndexFunction],
        departures: Mapping[str, IndexFunction] | None = None,
        on_change: Callable[[Touched], None] | None = None,
    ) -> None:
        self.on_change = on_change or (lambda touched: None)
        self.indexes = indexes
        self.functions = functions
        self.departure_functions = departures or {}
        self.objects: dict[ObjectKey, Contribution] = {}
        self.departed: OrderedDict[ObjectKey, tuple[tuple[str, Hashable], ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.objects)

    # The Reflector's sink: file each listed object, replace with a listing, apply each watch event.

    def replace(self, contributions: Mapping[ObjectKey, Contribution]) -> None:
        touched = self.replaced(contributions)
        if touched:
            self.on_change(touched)

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        touched = self.delete(body) if kind == "DELETED" else self.upsert(body)
        if touched:
            self.on_change(touched)

    def file(self, body: Mapping[str, Any]) -> Contribution:
        """What `body` puts in the indexes."""
        entries = []
        for name, function in self.functions.items():
            entry = function(body)
            if entry is not None:
                entries.append((name, entry[0], entry[1]))
        return Contribution(str((body.get("metadata") or {}).get("resourceVersion") or ""), tuple(entries))

    def upsert(self, body: Mapping[str, Any]) -> Touched:
        obj = object_key(body)
        return self._forget_departure(obj) + self._set(obj, self.file(body))

    def delete(self, body: Mapping[str, Any]) -> Touched:
        obj = object_key(body)
        return self._set(obj, None) + self._record_departure(obj, body)

    def _record_departure(self, obj: ObjectKey, body: Mapping[str, Any]) -> Touched:
        touched = self._forget_departure(obj)
        slots = []
        for name, function in self.departure_functions.items():
            entry = function(body)
            if entry is not None:
                self.indexes[name].put(entry[0], obj, entry[1])
                slots.append((name, entry[0]))
        if slots:
            self.departed[obj] = tuple(slots)
            touched += slots
        while len(self.departed) > DEPARTURES_KEPT:
            touched += self._forget_departure(next(iter(self.departed)))
        return touched

    def _forget_departure(self, obj: ObjectKey) -> Touched:
        slots = self.departed.pop(obj, ())
        for name, key in slots:
            self.indexes[name].remove(key, obj)
        return list(slots)

    def replaced(self, contributions: Mapping[ObjectKey, Contribution]) -> Touched:
        """A full listing: objects it lacks are deleted, the others set; returns every touched (index, key)."""
        touched: Touched = []
        for obj in [obj for obj in self.objects if obj not in contributions]:
            touched += self._set(obj, None)
        for obj, contribution in contributions.items():
            touched += self._forget_departure(obj) + self._set(obj, contribution)
        return touched

    def _set(self, obj: ObjectKey, new: Contribution | None) -> Touched:
        old = self.objects.pop(obj, None)
        if new is not None:
            self.objects[obj] = new
        old_entries = {(name, key): view for name, key, view in (old.entries if old else ())}
        new_entries = {(name, key): view for name, key, view in (new.entries if new else ())}
        touched: Touched = []
        for slot in old_entries.keys() - new_entries.keys():
            self.indexes[slot[0]].remove(slot[1], obj)
            touched.append(slot)
        for slot, view in new_entries.items():
            if slot not in old_entries or old_entries[slot] != view:
                self.indexes[slot[0]].put(slot[1], obj, view)
                touched.append(slot)
        return touched
