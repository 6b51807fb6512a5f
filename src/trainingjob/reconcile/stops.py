"""status.lastStop: the last time running workers were stopped before they finished (suspend, a restart for a spec
change such as a scale, a disruption such as preemption, or a failed peer), and whether they saved a checkpoint on
their way out.

Why record it: a stop used to lose, silently, everything since the last periodic checkpoint. A worker that uses
trainingjob.sdk.on_stop saves one at its next safe point after SIGTERM and reports `stopped: true` with it; the
status then says "checkpointed", the next attempt resumes from it (it is the newest checkpoint of the run), and the
resume says which one. A stop nobody reports stays "not checkpointed": the resume starts from the last periodic
checkpoint, and says so too. Pure functions of the status and the newest report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainingjob.api.types import TrainingJob
from trainingjob.kube.phases import PodPhase
from trainingjob.progress.fold import progress_fields
from trainingjob.progress.report import Report, without_pace
from trainingjob.reconcile.decision import Changes, Decision
from trainingjob.reconcile.observed import PodView


def stop_begun(reason: str, now: str, pods: Iterable[PodView]) -> dict[str, Any] | None:
    """The record of a stop the operator starts now for `reason`; None when no worker was running to stop."""
    if not any(pod.live and pod.phase == PodPhase.RUNNING for pod in pods):
        return None
    return {"reason": reason, "time": now, "checkpointed": False}


def stop_reported(previous: Mapping[str, Any] | None, report: Report) -> dict[str, Any] | None:
    """status.lastStop once a worker reported its stop (None when `report` is not a stop report). A stop the
    operator did not start (a pod deleted by hand, a node drained) has no record yet and gets one."""
    if not report.stopped:
        return None
    stop = dict(previous or {"reason": "WorkerStopped", "time": report.received})
    if report.checkpoint is not None:
        stop["checkpointed"] = True
        stop["checkpoint"] = {**report.checkpoint, "time": report.received}
    else:
        stop.setdefault("checkpointed", False)
    return stop


def report_changes(job: TrainingJob, report: Report | None, so_far: Decision) -> Changes:
    """What `report` changes in the status (progress/fold.py) and the stop it reports (status.lastStop), over what
    the plan decided so far. Workers this plan stops (a restart or a suspend: attemptStartTime goes) leave no pace
    behind, even in a report that came with the decision: the next attempt measures its own."""
    fields = progress_fields(job, report)
    decided = so_far.changes.fields
    if report is not None and (stop := stop_reported(decided.get("last_stop") or job.status.last_stop, report)):
        fields["last_stop"] = stop
    if "progress" in fields and "attempt_start_time" in decided and decided["attempt_start_time"] is None:
        fields["progress"] = without_pace(fields["progress"])
    return Changes(fields)


def resume_source(last_stop: Mapping[str, Any] | None, last_checkpoint: Mapping[str, Any] | None) -> str:
    """What the workers of a resumed job start from, in words, for the Resumed event (status.lastStop and
    status.lastCheckpoint)."""
    stop = last_stop or {}
    saved = stop.get("checkpoint") or {}
    if stop.get("checkpointed") and saved.get("path"):
        return f"from checkpoint {saved['path']}, saved when they were stopped"
    last = (last_checkpoint or {}).get("path")
    missed = "; they saved none when they were stopped" if stop else ""
    if last:
        return f"from the last checkpoint, {last}{missed}"
    return f"from their start, there being no checkpoint{missed}"
