"""status.resources (seed 002's): the GPUs and nodes a job holds and how busy its GPUs are, and the optional idle-GPU
policy, as pure functions of the job, its pods, the GPU telemetry and the clock.

Utilisation comes from the cluster's DCGM exporters (operator/gpu_telemetry.py), per worker pod; the job's value is
the average over the workers reported. It is written only when it moves by GPU_UTILIZATION_STEP points or more (or
appears or goes): telemetry changes at every sample, and a status write per job per sample would be thousands of
writes a minute at scale for a number nobody reads to the percent. `gpuIdleSince` marks since when every reported
GPU has stayed below the idle threshold; with the operator's `--idle-gpu-timeout`, a job idle that long fails with
reason GPUsIdle (seed 002's "auto-shutdown idle resources"). Off by default: an idle GPU may be a job waiting on
data, and only the cluster's admins can say how long is too long.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from trainingjob.api.status import Phase
from trainingjob.api.times import format_time, parse_time
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.kube.phases import POD_ACTIVE
from trainingjob.planning.actions import Event
from trainingjob.reconcile.decision import Changes, Decision, Summary
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.status import Outcome

GPU_UTILIZATION_STEP = 5.0


def holding_pods(pods: list[PodView]) -> list[PodView]:
    """Pods that hold their node's resources: bound to a node and not finished (a Terminating pod still holds its
    GPUs, as the scheduler and the kubelet count them, until it is gone)."""
    return [p for p in pods if p.node_name and p.phase in POD_ACTIVE]


def job_utilization(pods: list[PodView], utilization: Mapping[str, float]) -> float | None:
    """The average over the holding pods the exporters report (None: none reported)."""
    values = [utilization[p.name] for p in pods if p.name in utilization]
    return round(sum(values) / len(values), 1) if values else None


def _kept_utilization(previous: float | None, current: float | None) -> float | None:
    """The value to show: the previous one unless the new one differs by a step or more (or appears or goes)."""
    if previous is None or current is None or abs(current - previous) >= GPU_UTILIZATION_STEP:
        return current
    return previous


def resources_status(
    job: TrainingJob,
    pods: list[PodView],
    utilization: Mapping[str, float],
    now: datetime.datetime,
    idle_threshold: float,
) -> dict[str, Any] | None:
    """The new status.resources (None: nothing held and nothing shown before)."""
    previous = job.status.resources or {}
    holding = holding_pods(pods)
    if not holding and not previous:
        return None
    current = job_utilization(holding, utilization)
    shown = _kept_utilization(previous.get("gpuUtilization"), current)
    resources: dict[str, Any] = {
        "allocatedGPUs": sum(job.spec.gpus_of(p.role) for p in holding),
        "allocatedNodes": len({p.node_name for p in holding}),
    }
    if shown is not None:
        resources["gpuUtilization"] = shown
    if current is not None and current < idle_threshold and resources["allocatedGPUs"]:
        resources["gpuIdleSince"] = previous.get("gpuIdleSince") or format_time(now)
    return resources


def idle_seconds_left(resources: Mapping[str, Any] | None, now: datetime.datetime, limit: int | None) -> float | None:
    """Seconds until the idle-GPU limit is reached (≤ 0: reached); None without a limit or while not idle."""
    since = parse_time((resources or {}).get("gpuIdleSince"))
    if not limit or since is None:
        return None
    return limit - (now - since).total_seconds()


def plan_resources(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime, config: OperatorConfig, decided: Decision
) -> Decision:
    """`decided` with status.resources of a job that still runs; with the idle-GPU policy on, a job idle past it
    fails (GPUsIdle): its status then says only that (what `decided` changed in the status is dropped, its actions
    and events stay). A job that has just finished holds nothing any more (its last utilization stays, for the
    record)."""
    if decided.summary is not None and decided.summary.outcome.phase.finished:
        last = decided.changes.fields.get("resources", job.status.resources)
        if last is None:
            return decided
        kept = {"gpuUtilization": last["gpuUtilization"]} if "gpuUtilization" in last else {}
        return decided + Decision(changes=Changes({"resources": {"allocatedGPUs": 0, "allocatedNodes": 0, **kept}}))
    resources = resources_status(job, list(observed.pods), observed.gpu_utilization, now, config.idle_gpu_threshold)
    if resources is not None:
        decided += Decision(changes=Changes({"resources": resources}))
    left = idle_seconds_left(resources, now, config.idle_gpu_seconds)
    if left is None:
        return decided
    if left > 0:
        return decided + Decision(requeue_after=left)
    message = (
        f"every GPU of the job stayed below {config.idle_gpu_threshold:g}% utilization for "
        f"{config.idle_gpu_seconds}s (the operator's --idle-gpu-timeout)"
    )
    current = {p.replica: p for p in observed.pods if p.live}
    idle = Decision(
        events=(Event("Warning", "GPUsIdle", message),),
        changes=Changes({"resources": resources}),
        summary=Summary(Outcome(Phase.FAILED, "GPUsIdle", message), current),
    )
    return Decision(decided.actions, decided.events, requeue_after=decided.requeue_after) + idle
