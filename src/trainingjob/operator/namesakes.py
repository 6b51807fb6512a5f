"""Per job, the worker names held by pods that are not its workers (reconcile/namesakes.py says how that happens).

A create that met AlreadyExists is followed by one read of the namesake: usually it is the job's own pod that the
cache has not shown yet (nothing to say: its watch event comes), otherwise what holds the name goes to the planner,
which reports it (condition Blocked, reason PodNameTaken, a Warning Event). A relabelled pod is no longer watched,
so its deletion sends no event: the job is looked at again after a backoff instead, 2 s doubling up to 60 s, one
create and one read each time, for as long as the name stays taken (a rare state that a person resolves).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import Any

from trainingjob.api.types import TrainingJob
from trainingjob.operator.apply import ApplyResult
from trainingjob.operator.backoffs import name_taken_recheck
from trainingjob.operator.lookups import read_json
from trainingjob.reconcile.namesakes import namesake_holder
from trainingjob.reconcile.status import TERMINAL_PHASES

logger = logging.getLogger(__name__)


class Namesakes:
    """What holds each job's taken worker names, kept only while the job exists; `core` is a CoreV1Api."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.taken: dict[Hashable, dict[str, str]] = {}
        self.in_a_row: dict[Hashable, int] = {}

    def of(self, key: Hashable) -> Mapping[str, str]:
        return self.taken.get(key) or {}

    def forget(self, key: Hashable) -> None:
        self.taken.pop(key, None)
        self.in_a_row.pop(key, None)

    async def settle(self, key: Hashable, job: TrainingJob, outcome: ApplyResult) -> float | None:
        """Learn from one apply which names are taken and which are free again; seconds until the job should be
        looked at again (None: no name is taken, or the ones taken are the job's own pods on their way)."""
        if job.deleting or job.status.get("phase") in TERMINAL_PHASES:
            self.forget(key)  # it creates nothing any more
            return None
        taken = dict(self.taken.get(key) or {})
        for name in outcome.claimed_pods:  # created now: the name was free
            taken.pop(name, None)
        for name in outcome.existed_pods:
            holder = await self.holder(job, name)
            if holder is None:
                taken.pop(name, None)
            else:
                taken[name] = holder
        if not taken:
            self.forget(key)
            return None
        if taken != self.taken.get(key):
            logger.info("worker name(s) taken by pods that are not the job's workers: %s", taken)
        self.taken[key] = taken
        self.in_a_row[key] = self.in_a_row.get(key, 0) + 1 if outcome.existed_pods else self.in_a_row.get(key, 1)
        return name_taken_recheck(self.in_a_row[key])

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
