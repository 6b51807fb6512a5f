"""The pods a job wants, as (role, index) pairs: `worker` from spec.workers, the others from spec.roles.

The planner, the status and the builders all key pods by `Replica`, so a chief and worker 0 never share a slot,
and every list of them comes out in one order (constants.ROLES: chief, launcher, ps, worker, evaluator).
"""

from __future__ import annotations

from typing import NamedTuple

from trainingjob.api import constants as k
from trainingjob.api.types import JobSpec

ROLE_RANK = {role: rank for rank, role in enumerate(k.ROLES)}


class Replica(NamedTuple):
    role: str
    index: int

    def __str__(self) -> str:
        return f"{self.role} {self.index}"


def replica_order(replica: Replica) -> tuple[int, int]:
    """Sort key: by role in constants.ROLES order, then by index."""
    return (ROLE_RANK.get(replica.role, len(ROLE_RANK)), replica.index)


def role_counts(spec: JobSpec) -> dict[str, int]:
    """Pods wanted per role, for the roles the job has (worker always), in constants.ROLES order."""
    return {role: spec.replicas_of(role) for role in k.ROLES if role == k.WORKER or spec.replicas_of(role) > 0}


def desired_replicas(spec: JobSpec) -> list[Replica]:
    return [Replica(role, i) for role, count in role_counts(spec).items() for i in range(count)]


def is_desired(spec: JobSpec, replica: Replica) -> bool:
    return 0 <= replica.index < spec.replicas_of(replica.role)


def chief_replica(spec: JobSpec) -> Replica:
    """The pod that reports progress and should save checkpoints (TRAININGJOB_IS_CHIEF): a chief role's pod
    (frameworks/base.py: Role.chief, TensorFlow's chief) when the job has one, else worker 0 (also for MPI, whose
    rank 0 runs on the first worker of the hostfile)."""
    return next((Replica(role, 0) for role in k.CHIEF_ROLES if spec.replicas_of(role) > 0), Replica(k.WORKER, 0))
