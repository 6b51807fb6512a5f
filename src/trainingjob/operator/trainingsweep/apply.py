"""A sweep's plan, executed through the one writer (operator/runtime/writer.py): stop marks on trials first (the
status about to be written already counts them), then the sweep's status (a stale plan is refused by its
resourceVersion before any trial is created), then new trials, then Events on the sweep and on the trials
concerned."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.runtime.writer import AdmissionRefused, Outcome, Writer, Written, status_patch
from trainingjob.operator.trainingjob.watches import TRAININGJOBS
from trainingjob.operator.trainingsweep.watches import SWEEPS
from trainingjob.planning.actions import Event
from trainingjob.reconcile.admission import ANNOTATION
from trainingjob.sweeps.admission import sign_trial
from trainingjob.sweeps.planner import SweepPlan, TrialWrite
from trainingjob.sweeps.types import TrainingSweep


@dataclass
class Applied:
    """What the writes did: trials created (or found existing), the API server's refusal of a trial, and whether
    the plan was stale (then nothing was written)."""

    created: list[str] = field(default_factory=list)
    rejection: str = ""
    stale: bool = False


class SweepApplier:
    def __init__(self, writer: Writer, admission_key: bytes | None = None) -> None:
        """`admission_key`: the key trial tokens are signed with (sweeps/admission.py); None where the operator
        serves no webhooks (then it checks no stamps either)."""
        self.writer = writer
        self.admission_key = admission_key

    def with_token(self, sweep: TrainingSweep, manifest: dict[str, Any]) -> dict[str, Any]:
        """The trial with the operator's token, which the mutating webhook admits it on (the planner plans
        trials only for an admitted sweep)."""
        if self.admission_key is None:
            return manifest
        now = datetime.datetime.now(datetime.UTC)
        token = sign_trial(self.admission_key, manifest, sweep.uid, now)
        annotations = {**manifest["metadata"]["annotations"], ANNOTATION: token}
        return {**manifest, "metadata": {**manifest["metadata"], "annotations": annotations}}

    async def apply(self, sweep: TrainingSweep, body: Mapping[str, Any], plan: SweepPlan) -> Applied:
        """The trials' stop marks first, then the status, then new trials. The status is planned as if the marks
        were written (a pruned trial is Pruned, a sweep whose last trial was pruned is Succeeded): written first, a
        reader saw a finished sweep whose pruned trial still ran, and a SIGKILL between the two writes left a
        Pruned trial that ran on. A stale plan (the status write refused) creates nothing; its marks rest on the
        trials' own reports and the objective, which cannot change."""
        writes = await asyncio.gather(*(self.write_trial(sweep, write) for write in plan.writes))
        if plan.status and plan.status != dict(sweep.status):
            try:
                patch = status_patch(sweep.status, plan.status)
                version = body["metadata"]["resourceVersion"]
                await self.writer.patch_status(SWEEPS, sweep.namespace, sweep.name, version, patch)
            except ApiException as error:
                if error.status in (404, 409):
                    return Applied(stale=True)  # a newer sweep is on its way through the watch
                raise
        outcomes = await asyncio.gather(
            *(self.writer.create_object(TRAININGJOBS, sweep.namespace, self.with_token(sweep, m)) for m in plan.creates)
        )
        applied = Applied(
            created=[
                m["metadata"]["name"]
                for m, w in zip(plan.creates, outcomes, strict=True)
                if w.outcome in (Outcome.DONE, Outcome.EXISTED)
            ],
            rejection="; ".join(w.message for w in outcomes if w.outcome is Outcome.REJECTED),
        )
        events = [
            *plan.events,
            *created_events(plan, outcomes),
            *(e for w, done in zip(plan.writes, writes, strict=True) if done for e in w.events),
        ]
        sweep_ref = (sweep.namespace, sweep.name, sweep.uid)
        await asyncio.gather(*(self.writer.record_event(SWEEPS, sweep_ref, event) for event in events))
        denied = [w.message for w in outcomes if w.outcome is Outcome.DENIED]
        if denied:
            raise AdmissionRefused("; ".join(denied))
        return applied

    async def write_trial(self, sweep: TrainingSweep, write: TrialWrite) -> bool:
        """Patch one trial; its Events go on the trial too. False when it is gone (or a newer namesake)."""
        written = await self.writer.patch_object(TRAININGJOBS, sweep.namespace, write.name, write.uid, write.patch)
        if written.outcome is not Outcome.DONE:
            return False
        trial = (sweep.namespace, write.name, write.uid)
        await asyncio.gather(*(self.writer.record_event(TRAININGJOBS, trial, event) for event in write.events))
        return True


def created_events(plan: SweepPlan, outcomes: list[Written]) -> list[Event]:
    """TrialCreated for each trial this apply really created (a retry that meets AlreadyExists tells nothing)."""
    events = []
    for manifest, written in zip(plan.creates, outcomes, strict=True):
        if written.outcome is Outcome.DONE:
            values = ", ".join(f"{name}={value}" for name, value in sorted(manifest["spec"]["hyperparameters"].items()))
            events.append(Event("Normal", "TrialCreated", f"created trial {manifest['metadata']['name']}: {values}"))
    return events
