"""What one planner step decides, and how plan() folds the steps' decisions into one answer.

A step never edits a shared plan: it returns a Decision, and the caller adds them up in step order. The sum keeps
the actions and events in order, the soonest requeue, the status fields set (later ones win; None removes one) and
the counter moves (they add up, except that one plan starts at most one new attempt), and the summary of the
phase decided last. The status is then built once from that sum (`status_of`), the counters with it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.replicas import Replica
from trainingjob.api.status import Counters, JobStatus
from trainingjob.api.types import TrainingJob
from trainingjob.planning.actions import Action, Event
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.status import Outcome, build_status


@dataclass(frozen=True)
class Changes:
    """Status fields a step sets (JobStatus field names; None removes one) and how much it moves the counters."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    moves: Counters = field(default_factory=Counters)

    def __add__(self, other: Changes) -> Changes:
        """Later fields win; counter moves add up, except that one plan starts at most one new attempt."""
        moved = self.moves + other.moves
        attempt = max(self.moves.attempt, other.moves.attempt)
        return Changes({**self.fields, **other.fields}, Counters(attempt, moved.restart_count, moved.disruption_count))


@dataclass(frozen=True)
class Summary:
    """What the status summarizes: the phase and why, the pods it describes, what blocks them, what admission
    refused to create."""

    outcome: Outcome
    current: Mapping[Replica, PodView] = field(default_factory=dict)
    blocked: tuple[str, str] | None = None
    refused: Mapping[Replica, tuple[str, str]] | None = None


@dataclass(frozen=True)
class Decision:
    """One step's answer: actions to apply, events to record, status changes, when to look again, and (for the
    step that decides the phase) the summary."""

    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    changes: Changes = field(default_factory=Changes)
    requeue_after: float | None = None
    summary: Summary | None = None

    def __add__(self, other: Decision) -> Decision:
        return Decision(
            self.actions + other.actions,
            self.events + other.events,
            self.changes + other.changes,
            Decision.soonest(self.requeue_after, other.requeue_after),
            other.summary if other.summary is not None else self.summary,
        )

    @staticmethod
    def soonest(first: float | None, second: float | None) -> float | None:
        """The sooner of two requeues (None: none)."""
        if first is None:
            return second
        return first if second is None else min(first, second)

    def counters(self, job: TrainingJob) -> Counters:
        """The job's counters once this decision is applied."""
        return job.status.moved + self.changes.moves

    def status_of(self, job: TrainingJob, now: datetime.datetime) -> JobStatus:
        """The status this decision gives the job: built whole from the summary, or the stored one with the
        changes when no step summarized (a finished or deleted job)."""
        if self.summary is None:
            return job.status.replace(**self.changes.fields)
        summary = self.summary
        return build_status(
            job,
            summary.outcome,
            summary.current,
            self.counters(job),
            now,
            self.changes.fields,
            summary.blocked,
            summary.refused,
        )
