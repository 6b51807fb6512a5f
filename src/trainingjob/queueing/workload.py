"""The Workload a TrainingJob needs: one pod set per role, each with its count and a pod template carrying what
Kueue judges (resource requests, node selector, tolerations, affinity, priority class).

The template is built by the same builders as the workers' pods (worker_resources, worker_placement), so what Kueue
admits is what the workers request. Names are deterministic (`trainingjob-<job>-<hash of the job's uid>`): a job
deleted and created again with the same name never adopts its predecessor's Workload.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.replicas import role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import child_metadata
from trainingjob.builders.pod import worker_placement, worker_resources
from trainingjob.config import OperatorConfig

GROUP = "kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta2"
KIND = "Workload"
PLURAL = "workloads"
QUEUE_LABEL = f"{GROUP}/queue-name"
PRIORITY_LABEL = f"{GROUP}/priority-class"
# A Workload made for the job by someone else (MultiKueue, on a worker cluster: the copy of the manager cluster's
# Workload, which the job copied beside it names): the job uses it and never makes one of its own.
PREBUILT_LABEL = f"{GROUP}/prebuilt-workload-name"
# The hash of the pod sets a Workload was built from: a spec change while queued replaces the Workload.
LABEL_POD_SETS_HASH = f"{k.GROUP}/pod-sets-hash"
PRIORITY_CLASS_KIND = "WorkloadPriorityClass"
MAX_NAME = 253
NAME_PREFIX = "trainingjob-"


def workload_name(job_name: str, job_uid: str) -> str:
    suffix = hashlib.sha256(job_uid.encode()).hexdigest()[:5]
    return f"{NAME_PREFIX}{job_name}"[: MAX_NAME - len(suffix) - 1] + f"-{suffix}"


def pod_template(job: TrainingJob, config: OperatorConfig, role: str) -> dict[str, Any]:
    """What Kueue reads of a worker of `role`: requests (quota), and placement (which flavors can fit)."""
    container: dict[str, Any] = {"name": "trainer", "image": job.spec.image}
    resources = worker_resources(job, role)
    if resources:
        container["resources"] = resources
    return {"spec": {"restartPolicy": "Never", "containers": [container], **worker_placement(job, config, role)}}


def min_count(job: TrainingJob, role: str) -> int | None:
    """The fewest pods of `role` the job can run with, when fewer than it asks for: elastic.minWorkers for the
    workers of an elastic job (torchrun's agents train with any count between minWorkers and maxWorkers), so Kueue's
    partial admission (PartialAdmission, beta and on by default since v0.5) may admit fewer workers than spec.workers
    when its quota fits no more; the operator then creates as many as podSetAssignments[].count says. None for every
    other pod set: a fixed gang needs all of its pods (and Kueue allows minCount on one pod set only)."""
    elastic = job.spec.elastic
    if role != k.WORKER or elastic is None or elastic.min_workers >= job.spec.workers:
        return None
    return elastic.min_workers


def pod_sets(job: TrainingJob, config: OperatorConfig) -> list[dict[str, Any]]:
    """One pod set per role, in the roles' order, each asking for all of its pods; the workers of an elastic job
    with a minCount (min_count), every other pod set without."""
    sets = []
    for role, count in role_counts(job.spec).items():
        entry: dict[str, Any] = {"name": role, "count": count, "template": pod_template(job, config, role)}
        if (least := min_count(job, role)) is not None:
            entry["minCount"] = least
        sets.append(entry)
    return sets


def pod_sets_hash(sets: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(sets, sort_keys=True).encode()).hexdigest()[:16]


def priority_spec(priority_class: str | None, priorities: Mapping[str, int]) -> dict[str, Any]:
    """spec.priorityClassRef and spec.priority. Kueue requires both once a class is named, and its visibility API
    dereferences spec.priority of every pending Workload (v0.17.0 panics on one without), so it is always set: 0, as
    Kueue's own integrations set it, when no class is named."""
    if not priority_class:
        return {"priority": 0}
    reference = {"group": GROUP, "kind": PRIORITY_CLASS_KIND, "name": priority_class}
    return {"priorityClassRef": reference, "priority": priorities[priority_class]}


def desired_workload(
    job: TrainingJob, queue: str, priority_class: str | None, priorities: Mapping[str, int], config: OperatorConfig
) -> dict[str, Any]:
    """The Workload of `job` in LocalQueue `queue`, owned (controller reference) by the job."""
    sets = pod_sets(job, config)
    metadata = child_metadata(job, workload_name(job.name, job.uid), {LABEL_POD_SETS_HASH: pod_sets_hash(sets)})
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {"queueName": queue, "podSets": sets, **priority_spec(priority_class, priorities)},
    }
