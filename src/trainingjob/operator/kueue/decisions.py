"""One job's QueueDecision from the caches: the same answer for the Workload controller (which writes the
Workload) and the TrainingJob controller (which holds or runs the workers), since both read the same caches."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from trainingjob.api.constants import WORKER
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.kube.phases import POD_FINISHED
from trainingjob.operator.kueue.watches import FLAVORS, JOB_WORKLOADS, PRIORITIES
from trainingjob.operator.runtime.store import Indexes, views
from trainingjob.queueing.admission import WorkloadView
from trainingjob.queueing.planner import QueueDecision, QueueInputs, plan_queue
from trainingjob.queueing.workload import (
    PREBUILT_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    min_count,
    pod_sets,
    pod_sets_hash,
    workload_name,
)
from trainingjob.reconcile.observed import PodView


def workers_left(pods: Iterable[PodView], job_uid: str) -> int:
    """The job's pods that still hold what Kueue admitted: not finished, Terminating ones included (a graceful stop
    saves its checkpoint on the GPUs it has, and the scheduler still counts them), so an evicted job gives its quota
    back only once they are gone."""
    return sum(1 for pod in pods if pod.controller_uid == job_uid and pod.phase not in POD_FINISHED)


def job_labels(body: Mapping[str, Any]) -> Mapping[str, str]:
    return (body.get("metadata") or {}).get("labels") or {}


def is_queued(body: Mapping[str, Any]) -> bool:
    """Labelled for a LocalQueue: what makes a job a Kueue workload."""
    return bool(job_labels(body).get(QUEUE_LABEL))


def priority_values(indexes: Indexes) -> dict[str, int]:
    """WorkloadPriorityClass name -> value, from the cache (a few objects per cluster)."""
    return {name: value for name in indexes.get(PRIORITIES) or {} for value in views(indexes, PRIORITIES, name)}


def current_workload(job: TrainingJob, name: str, indexes: Indexes, prebuilt: bool = False) -> WorkloadView | None:
    """The job's Workload of that name; another one of the job's (an earlier spec's, being replaced) first if any,
    so it is deleted before a new one is made. A prebuilt one is the one of that name or none: another Workload
    carrying the job's name is not the job's to replace."""
    workloads = views(indexes, JOB_WORKLOADS, job.key)
    named = next((w for w in workloads if w.name == name), None)
    return named if prebuilt or named is not None else (workloads[0] if workloads else None)


def queue_inputs(
    job: TrainingJob,
    body: Mapping[str, Any],
    indexes: Indexes,
    config: OperatorConfig,
    served: bool,
    left: int,
) -> QueueInputs:
    job_label = job_labels(body)
    prebuilt = job_label.get(PREBUILT_LABEL)
    name = prebuilt or workload_name(job.name, job.uid)
    phase = job.status.phase
    return QueueInputs(
        queue=job_label.get(QUEUE_LABEL),
        priority_class=job_label.get(PRIORITY_LABEL),
        workload_name=name,
        pod_sets_hash=pod_sets_hash(pod_sets(job, config)),
        workload=current_workload(job, name, indexes, bool(prebuilt)) if served else None,
        priorities=priority_values(indexes),
        flavors={key: value for key in (indexes.get(FLAVORS) or {}) for value in views(indexes, FLAVORS, key)},
        kueue_served=served,
        workers_left=left,
        finished_phase=phase if phase is not None and phase.finished else None,
        suspended=job.spec.suspend,
        previous=job.status.queue or {},
        workers=job.spec.workers,
        min_workers=min_count(job, WORKER),
        prebuilt=bool(prebuilt),
    )


def queue_decision(
    job: TrainingJob,
    body: Mapping[str, Any],
    indexes: Indexes,
    config: OperatorConfig,
    served: bool,
    now: datetime.datetime,
    left: int = 0,
) -> QueueDecision:
    return plan_queue(queue_inputs(job, body, indexes, config, served, left), now)
