"""metav1.Condition bookkeeping: lastTransitionTime moves only when a condition's status does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONDITION_ORDER = (
    "Queued",
    "Running",
    "GangScheduled",
    "Blocked",
    "Restarting",
    "Suspended",
    "Succeeded",
    "Failed",
)


@dataclass(frozen=True)
class DesiredCondition:
    type: str
    status: bool
    reason: str
    message: str


def merge_conditions(
    previous: Sequence[Mapping[str, Any]], desired: Sequence[DesiredCondition], now: str, generation: int
) -> list[dict[str, Any]]:
    """Desired conditions in a stable order; conditions not desired any more are kept as they were."""
    by_type = {c["type"]: dict(c) for c in previous}
    for condition in desired:
        status = "True" if condition.status else "False"
        old = by_type.get(condition.type)
        transition = (old.get("lastTransitionTime") or now) if old and old.get("status") == status else now
        by_type[condition.type] = {
            "type": condition.type,
            "status": status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": transition,
            "observedGeneration": generation,
        }
    order = {name: i for i, name in enumerate(CONDITION_ORDER)}
    return sorted(by_type.values(), key=lambda c: (order.get(c["type"], len(order)), c["type"]))
