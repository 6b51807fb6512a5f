"""What Kueue's objects say, read once into small immutable views (the operator's cache keeps only these).

- A Workload: whether it holds quota and is admitted, why not (the QuotaReserved condition Kueue writes on every
  scheduling attempt: a LocalQueue that does not exist, insufficient quota, a request larger than the ClusterQueue
  can ever give), whether it was evicted or preempted and why, and which flavors and counts each pod set got.
- A ResourceFlavor: the node labels and tolerations its admission adds to pods (as Kueue's own job integrations add
  them: nodeSelector from spec.nodeLabels, tolerations from spec.tolerations).
- A WorkloadPriorityClass: its value.
Everything read here is written by Kueue or by cluster admins; messages are shown to users only after truncation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.builders.pod import QueuePlacement
from trainingjob.queueing.workload import LABEL_POD_SETS_HASH

MAX_MESSAGE = 1024
CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime", "observedGeneration")


@dataclass(frozen=True)
class Condition:
    status: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Assignment:
    """One pod set's share of an admission: a flavor per resource, and how many pods (partial admission)."""

    pod_set: str
    flavors: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None


@dataclass(frozen=True)
class WorkloadView:
    name: str
    uid: str
    queue: str
    pod_sets_hash: str
    cluster_queue: str | None = None
    assignments: tuple[Assignment, ...] = ()
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    deleting: bool = False
    active: bool = True
    resource_version: str = ""
    # The conditions as written (trimmed to their standard fields): a status write keeps Kueue's own ones.
    raw_conditions: tuple[Mapping[str, Any], ...] = ()

    def condition(self, kind: str) -> Condition | None:
        return self.conditions.get(kind)

    def holds(self, kind: str) -> bool:
        found = self.conditions.get(kind)
        return found is not None and found.status

    @property
    def admitted(self) -> bool:
        """Quota reserved and every admission check passed, with an assignment to run by."""
        return self.holds("Admitted") and bool(self.assignments)

    @property
    def quota_reserved(self) -> bool:
        return self.holds("QuotaReserved") or bool(self.assignments)

    @property
    def evicted(self) -> Condition | None:
        found = self.conditions.get("Evicted")
        return found if found is not None and found.status else None

    @property
    def finished(self) -> bool:
        return self.holds("Finished")

    def assigned_count(self, pod_set: str) -> int | None:
        for assignment in self.assignments:
            if assignment.pod_set == pod_set:
                return assignment.count
        return None


@dataclass(frozen=True)
class FlavorView:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


def _text(value: Any) -> str:
    return str(value or "")[:MAX_MESSAGE]


def _conditions(items: Iterable[Any]) -> dict[str, Condition]:
    result = {}
    for item in items:
        if isinstance(item, Mapping) and item.get("type"):
            status = item.get("status") == "True"
            result[str(item["type"])] = Condition(status, _text(item.get("reason")), _text(item.get("message")))
    return result


def _assignments(admission: Mapping[str, Any]) -> tuple[Assignment, ...]:
    result = []
    for item in admission.get("podSetAssignments") or []:
        count = item.get("count")
        flavors = {str(resource): str(flavor) for resource, flavor in (item.get("flavors") or {}).items()}
        result.append(Assignment(str(item.get("name", "")), flavors, None if count is None else int(count)))
    return tuple(result)


def workload_view(body: Mapping[str, Any]) -> WorkloadView:
    metadata = body.get("metadata") or {}
    status = body.get("status") or {}
    admission = status.get("admission") or {}
    return WorkloadView(
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        queue=(body.get("spec") or {}).get("queueName", ""),
        pod_sets_hash=(metadata.get("labels") or {}).get(LABEL_POD_SETS_HASH, ""),
        cluster_queue=admission.get("clusterQueue"),
        assignments=_assignments(admission),
        conditions=_conditions(status.get("conditions") or []),
        deleting=metadata.get("deletionTimestamp") is not None,
        active=(body.get("spec") or {}).get("active", True) is not False,
        resource_version=metadata.get("resourceVersion", ""),
        raw_conditions=tuple(
            {key: item[key] for key in CONDITION_FIELDS if key in item}
            for item in status.get("conditions") or []
            if isinstance(item, Mapping)
        ),
    )


def flavor_view(body: Mapping[str, Any]) -> FlavorView:
    spec = body.get("spec") or {}
    return FlavorView(
        name=(body.get("metadata") or {}).get("name", ""),
        node_labels=dict(spec.get("nodeLabels") or {}),
        tolerations=tuple(dict(t) for t in spec.get("tolerations") or []),
    )


def priority_value(body: Mapping[str, Any]) -> int:
    return int(body.get("value", 0))


def placement(workload: WorkloadView, flavors: Mapping[str, FlavorView]) -> dict[str, QueuePlacement]:
    """Per pod set (role): the admitted flavors' node labels and tolerations. A flavor missing from the cache adds
    nothing (Kueue admitted against it, so it existed a moment ago)."""
    result = {}
    for assignment in workload.assignments:
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor_name in dict.fromkeys(assignment.flavors.values()):
            flavor = flavors.get(flavor_name)
            if flavor is None:
                continue
            selector.update(flavor.node_labels)
            tolerations += [t for t in flavor.tolerations if t not in tolerations]
        result[assignment.pod_set] = QueuePlacement(selector, tuple(tolerations))
    return result


def merged_conditions(
    existing: Iterable[Mapping[str, Any]], updates: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`existing` with each update put in place of the condition of its type (added when new); a condition whose
    status does not change keeps its lastTransitionTime, as the API conventions want."""
    result = [dict(c) for c in existing]
    for update in updates:
        current = next((c for c in result if c.get("type") == update["type"]), None)
        if current is None:
            result.append(dict(update))
            continue
        kept = current.get("lastTransitionTime") if current.get("status") == update["status"] else None
        current.update(update)
        if kept:
            current["lastTransitionTime"] = kept
    return result
