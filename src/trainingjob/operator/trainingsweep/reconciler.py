"""TrainingSweep in the operator: read the caches, run the pure sweep planner, apply its plan (apply.py).

Its own controller (work queue and workers), registered in watches.py; its keys are the sweeps' (namespace, name).
A sweep's reconcile builds an Optuna study only when it samples or judges (sweeps/planner.py); otherwise it only
recounts its trials, which costs no API call when nothing changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from types import ModuleType
from typing import Any

from trainingjob.kube.reflector import ObjectKey
from trainingjob.operator.runtime.objects import Clock, ObjectReconciler
from trainingjob.operator.runtime.store import Index, Indexes, views
from trainingjob.operator.trainingsweep.apply import SweepApplier
from trainingjob.operator.trainingsweep.memory import SweepMemory
from trainingjob.operator.trainingsweep.watches import REGISTRATION, SWEEP_BODIES, SWEEP_TRIALS
from trainingjob.sweeps.admission import sweep_problem
from trainingjob.sweeps.planner import ObservedSweep, SweepPlan, plan_sweep
from trainingjob.sweeps.status import progress_only
from trainingjob.sweeps.types import TrainingSweep

logger = logging.getLogger(__name__)
# Sweeps are few and a study of 100 trials is built in tens of milliseconds: a small pool of their own.
SWEEP_WORKERS = 2
# A status write that only carries running trials' latest value and epochs waits this long after the sweep's last
# status write: every trial's progress report would otherwise rewrite the sweep (parallelism x reports), while
# each trial's own status already shows it live. State changes (a trial created, finished, pruned) are written at once.
PROGRESS_WRITE_SECONDS = 15.0


class SweepReconciler(ObjectReconciler):
    """Plans one sweep from the caches and applies the plan; remembers per sweep one SweepMemory."""

    BODIES = SWEEP_BODIES
    REGISTRATION = REGISTRATION
    WORKERS = SWEEP_WORKERS

    def __init__(
        self,
        indexes: Indexes,
        applier: SweepApplier,
        engine: Callable[[], ModuleType | None],
        clock: Clock | None = None,
        resync_seconds: float = 0,
        metrics: object = None,
        admission_key: bytes | None = None,
    ) -> None:
        self.admission_key = admission_key  # None: no webhooks served, no stamps checked (as for TrainingJobs)
        self.applier = applier
        self.engine = engine  # called on each plan: engine.load_engine imports Optuna on the first sweep only
        self.memory: dict[ObjectKey, SweepMemory] = {}
        super().__init__(indexes, clock, resync_seconds, metrics)
        trials = indexes.get(SWEEP_TRIALS)
        if isinstance(trials, Index):
            trials.on_put = self.trial_sighted

    @staticmethod
    def progress_wait(sweep: TrainingSweep, plan: SweepPlan, memory: SweepMemory, now: float) -> float:
        """Seconds the plan's status write should wait (0: write it now)."""
        if plan.creates or plan.writes or plan.events or not progress_only(sweep.status, plan.status):
            return 0.0
        return max(0.0, memory.status_written + PROGRESS_WRITE_SECONDS - now)

    def trial_sighted(self, key: Hashable, obj: ObjectKey) -> None:
        """The watch showed a trial: its creation is met, whatever the next plan sees."""
        memory = self.memory.get(key)  # type: ignore[arg-type]
        if memory is not None:
            memory.expectations.seen(obj[1])

    def forget(self, key: ObjectKey) -> None:
        self.memory.pop(key, None)

    async def reconcile_body(self, key: ObjectKey, body: Mapping[str, Any]) -> None:
        sweep = TrainingSweep.from_body(body)
        memory = self.memory.get(key)
        if memory is None or memory.uid != sweep.uid:
            memory = self.memory[key] = SweepMemory(uid=sweep.uid)
        trials = views(self.indexes, SWEEP_TRIALS, key)
        now = time.monotonic()
        pending = memory.expectations.pending_creations({t.name for t in trials}, now)
        not_admitted = None if self.admission_key is None else sweep_problem(self.admission_key, sweep)
        observed = ObservedSweep(
            trials, frozenset(pending), dict(memory.judged), dict(memory.private), memory.rejection, not_admitted
        )
        plan = plan_sweep(sweep, observed, self.engine(), self.clock())
        wait = self.progress_wait(sweep, plan, memory, now)
        if wait > 0:
            plan.status = {}  # only running trials' progress changed: written later, with what else comes
            self.controller.queue.add_after(key, wait)
        applied = await self.applier.apply(sweep, body, plan)
        if applied.stale:
            return
        if plan.status and plan.status != dict(sweep.status):
            memory.status_written = now
        memory.expectations.expect_created(applied.created, now)
        memory.judged = plan.judged
        memory.keep_private(plan.private)
        if applied.rejection and not memory.rejection:
            memory.rejection = applied.rejection
            self.controller.queue.add(key)  # the next plan fails the sweep with the refusal
        if plan.creates or plan.writes:
            logger.info(
                "sweep reconciled: %d trial(s) created, %d trial(s) marked", len(applied.created), len(plan.writes)
            )
