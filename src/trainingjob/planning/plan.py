"""A planner's answer, the same shape for every kind: the status the object should have (each kind's own type),
the actions to apply in order, the Events to record, and when to look again.

A planner builds its Plan once, at the end, from what its steps returned; the reconciler writes it and never edits
it. A kind that needs more from its planner (a TrainingJob's progress report, a sweep's trials) extends it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from trainingjob.planning.actions import Action, Event

Status = TypeVar("Status")


@dataclass
class Plan(Generic[Status]):
    status: Status
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
