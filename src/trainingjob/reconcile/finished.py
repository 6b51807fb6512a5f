"""What a finished job's status says about its pods as cleanup removes them (pure).

A job's status is frozen when it finishes, but cleanup (cleanPodPolicy), a TTL or a user then deletes pods: a status
that still listed them `Running` made `tj watch` print `Failed · workers 2/2 running` and the UI list running
workers (and offer their logs) for a job with none. So a finished job's worker entries follow its pods: a pod being
deleted is `Terminating`, a pod that is gone is `Deleted` (its last phase in the message, its exit code kept), and
the counters that count pods (`workers`, `roleStatuses`) count what is left. Each pod changes at most twice, so a
finished job costs a bounded number of writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.status import JobStatus
from trainingjob.kube.phases import POD_ACTIVE, PodPhase
from trainingjob.reconcile.observed import PodView
from trainingjob.reconcile.status import worker_status

TERMINATING = "Terminating"
DELETED = "Deleted"
NOT_CREATED = "NotCreated"
# Entries that describe no pod, or one that no longer exists: nothing left to follow.
SETTLED = (DELETED, NOT_CREATED)
GONE_REASON = "PodDeleted"
PHASE_COUNTS = (
    ("pending", PodPhase.PENDING),
    ("running", PodPhase.RUNNING),
    ("succeeded", PodPhase.SUCCEEDED),
    ("failed", PodPhase.FAILED),
)


def removed_entry(entry: Mapping[str, Any], phase: str) -> dict[str, Any]:
    """`entry` for a pod being deleted (Terminating) or gone (Deleted): what it was is kept in the message."""
    was = entry.get("phase") or "Unknown"
    if phase == TERMINATING:
        message = f"the job finished; its pod is being deleted (it was {was})"
    else:
        message = "the pod was deleted after the job finished" + (f" (it was {was})" if was != TERMINATING else "")
    return {**entry, "phase": phase, "reason": GONE_REASON, "message": message}


def follow_entry(entry: Mapping[str, Any], pod: PodView | None, deleting: bool) -> dict[str, Any]:
    """One worker entry of a finished job, brought in line with its pod (None: no such pod any more).

    A Terminating entry stays so until its pod is gone: the exit code of a worker stopped by the cleanup says
    nothing about the training."""
    if entry.get("phase") in SETTLED:
        return dict(entry)
    if pod is None:
        return removed_entry(entry, DELETED)
    if entry.get("phase") == TERMINATING:
        return dict(entry)
    current = worker_status(pod)
    if (deleting or pod.deleting) and pod.phase in POD_ACTIVE:
        return removed_entry(current, TERMINATING)
    return current


def finished_worker_details(status: JobStatus, pods: Iterable[PodView], deleting: Collection[str]) -> dict[str, Any]:
    """workerStatuses, workers and roleStatuses of a finished job as its pods are now (JobStatus fields).

    `pods`: the job's pods the cache shows; `deleting`: names of those being deleted that the cache does not show
    deleting yet (this plan's cleanup, deletes the cache has not caught up with)."""
    if status.worker_statuses is None:
        return {}
    by_name = {pod.name: pod for pod in pods}
    entries = tuple(
        follow_entry(entry, by_name.get(entry.get("podName", "")), entry.get("podName") in deleting)
        for entry in status.worker_statuses
    )
    existing = [e for e in entries if e.get("phase") not in SETTLED]
    details: dict[str, Any] = {
        "worker_statuses": entries,
        "workers": sum(1 for e in existing if e.get("role", k.WORKER) == k.WORKER),
    }
    if status.role_statuses is not None:
        details["role_statuses"] = {
            role: {
                **counts,
                **{
                    key: sum(1 for e in existing if e.get("role", k.WORKER) == role and e.get("phase") == phase)
                    for key, phase in PHASE_COUNTS
                },
            }
            for role, counts in status.role_statuses.items()
        }
    return details
