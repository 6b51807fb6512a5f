"""Per job, the worker names held by pods that are not its workers (reconcile/namesakes.py says how that happens).

A create that met AlreadyExists is followed by one read of the namesake: usually it is the job's own pod that the
cache has not shown yet (nothing to say: its watch event comes), otherwise what holds the name goes to the planner,
which reports it (condition Blocked, reason PodNameTaken, a Warning Event). A relabelled pod is no longer watched,
so its deletion sends no event: the job is looked at again after a backoff instead, 2 s doubling up to 60 s, one
create and one read each time, for as long as the name stays taken (a rare state that a person resolves).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api.types import TrainingJob
from trainingjob.operator.lookups import read_json
from trainingjob.operator.trainingjob.apply import ApplyResult
from trainingjob.operator.trainingjob.backoffs import name_taken_recheck
from trainingjob.reconcile.namesakes import namesake_holder

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class TakenNames:
    """One job's worker names held by pods that are not its workers (name -> what holds it), and how many applies
    in a row met one (the recheck backs off with it)."""

    taken: dict[str, str] = field(default_factory=dict)
    in_a_row: int = 0

    def forget(self) -> None:
        self.taken, self.in_a_row = {}, 0


class Namesakes:
    """Finds out what holds a job's taken worker names; `core` is a CoreV1Api."""

    def __init__(self, core: Any) -> None:
        self.core = core

    async def settle(self, names: TakenNames, job: TrainingJob, outcome: ApplyResult) -> float | None:
        """Learn from one apply which names are taken and which are free again; seconds until the job should be
        looked at again (None: no name is taken, or the ones taken are the job's own pods on their way)."""
        if job.deleting or job.status.finished:
            names.forget()  # it creates nothing any more
            return None
        taken = dict(names.taken)
        for name in outcome.claimed_pods:  # created now: the name was free
            taken.pop(name, None)
        for name in outcome.existed_pods:
            holder = await self.holder(job, name)
            if holder is None:
                taken.pop(name, None)
            else:
                taken[name] = holder
        if not taken:
            names.forget()
            return None
        if taken != names.taken:
            logger.info("worker name(s) taken by pods that are not the job's workers: %s", taken)
        names.taken = taken
        names.in_a_row = names.in_a_row + 1 if outcome.existed_pods else (names.in_a_row or 1)
        return name_taken_recheck(names.in_a_row)

    async def holder(self, job: TrainingJob, name: str) -> str | None:
        """What holds `name` (None: the job's own pod, or nothing any more). A failed read says only that the pod
        could not be read: the condition then still tells which worker waits for which name."""
        try:
            status, body = await read_json(self.core.read_namespaced_pod, name, job.namespace)
        except Exception as error:  # a failed lookup must never fail a reconcile
            return f"it could not be read ({error!r})"
        if status == 404:
            return None
        if body is None:
            return f"it could not be read (HTTP {status})"
        return namesake_holder(job.name, job.uid, body)
