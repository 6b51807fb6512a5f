"""The job the planner plans when it names a runtime (pure): the runtime recorded in its status, else the one the
cache holds, under the job's own fields (api/runtimes.py).

Recorded once: the first plan that finds the runtime writes it into status.runtime (kind, name, generation,
framework, template), and every later plan builds the job from that record. So an edited runtime changes no job
that has started — its workers are neither restarted nor built differently on a later restart — and a deleted one
stops none. A runtime the cache does not hold yet is waited for during RUNTIME_GRACE_SECONDS after the job was
created (the runtime's informer may be a moment behind the job's); after that, or for a runtime of another framework
or one that leaves the job without an image, the job fails with InvalidSpec.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from trainingjob.api.runtimes import RuntimeRef, RuntimeSnapshot, effective_job, recorded, runtime_problems
from trainingjob.api.times import parse_time
from trainingjob.api.types import TrainingJob

RUNTIME_GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class Resolved:
    """The job to plan (its effective spec, the runtime recorded), or why it cannot be planned: `problem` (invalid
    for good) or `waiting` (seconds until the runtime is given up on)."""

    job: TrainingJob
    problem: str | None = None
    waiting: float | None = None
    missing: str = ""


def resolve_runtime(job: TrainingJob, cached: RuntimeSnapshot | None, now: datetime.datetime) -> Resolved:
    ref = RuntimeRef.from_spec(job.raw_spec)
    if ref is None:
        return Resolved(job)
    where = ref.describe(job.namespace)
    snapshot = recorded(job.status) or cached
    if snapshot is None:
        created = parse_time(job.creation_timestamp) or now
        left = RUNTIME_GRACE_SECONDS - (now - created).total_seconds()
        if left > 0:
            return Resolved(job, waiting=left, missing=where)
        return Resolved(job, problem=f"spec.runtimeRef: {where} does not exist")
    effective = effective_job(job, snapshot)
    problems = runtime_problems(snapshot, job.spec.framework, effective.raw_spec, where)
    return Resolved(effective, problem="; ".join(problems) or None)


def runtime_gives(job: TrainingJob, cached: RuntimeSnapshot | None, field: str) -> bool:
    """Whether the runtime the job starts from (recorded, else cached) sets `field` of its spec: the job's own spec
    alone does not say what its pods are built with."""
    if RuntimeRef.from_spec(job.raw_spec) is None:
        return False
    snapshot = recorded(job.status) or cached
    return snapshot is not None and field in snapshot.template
