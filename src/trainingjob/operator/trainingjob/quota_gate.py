"""One job at a time creates workers into a namespace that has ResourceQuotas.

The planner creates a gang's workers only when the quotas have room for all of them (scheduling/quota.py). Two
jobs planned at the same moment from the same quota usage would both see the room and both create, and admission
would then refuse part of each: they take turns instead. A turn reads the quotas afresh (what the previous turn
created is counted by then: quota admission updates usage as it admits), plans and applies. Namespaces without
quotas, and jobs with no worker to create, never wait for a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from trainingjob.api.replicas import desired_replicas
from trainingjob.api.types import TrainingJob
from trainingjob.operator.lookups import Lookups
from trainingjob.reconcile.observed import ObservedChildren
from trainingjob.reconcile.queued import admitted_job


def creates_workers(job: TrainingJob, observed: ObservedChildren) -> bool:
    """Whether the job may have pods to create: it runs, is not suspended and has fewer live pods than it wants
    (workers and every other role's)."""
    if job.deleting or job.spec.suspend or job.status.finished:
        return False
    wanted = admitted_job(job, observed.queue).spec  # an elastic job admitted partially wants the workers admitted
    return sum(1 for p in observed.pods if p.live) < len(desired_replicas(wanted))


class QuotaGate:
    def __init__(self, lookups: Lookups | None) -> None:
        self.lookups = lookups
        self.turns: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def turn(self, namespace: str, creating: bool) -> AsyncIterator[None]:
        lookups = self.lookups
        if not creating or lookups is None or not (await lookups.resource_quotas(namespace)).quotas:
            yield
            return
        async with self.turns.setdefault(namespace, asyncio.Lock()):
            lookups.quotas.forget(namespace)
            try:
                yield
            finally:
                lookups.quotas.forget(namespace)
