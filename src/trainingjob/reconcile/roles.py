"""What a pod's role means to the planner: who judges success, whose failure replaces whom, whose failure is
tolerated. Pure functions of the spec and the pod, beside the restart policies they refine.

- TensorFlow: with a chief, chief 0 judges success (Kubeflow's TFJob does the same); parameter servers and the
  evaluator never count for it. The evaluator is not part of the training: its failure is never a gang restart
  and never fails the job (it is replaced alone while the policy allows, else left Failed).
- MPI with a launcher: the launcher's mpirun judges success; any failure restarts the gang (mpirun cannot lose a
  rank and go on).
- Elastic PyTorch: worker 0 hosts the c10d rendezvous, so it judges success and losing it restarts every worker;
  any other worker is replaced alone while torchrun's agents re-rendezvous without it.
"""

from __future__ import annotations

from trainingjob.api import constants as k
from trainingjob.api.replicas import Replica
from trainingjob.api.types import JobSpec
from trainingjob.reconcile.observed import PodView

# Roles the training can do without: not needed for the job to be Running, their failure never fails the job.
OPTIONAL_ROLES = frozenset({k.EVALUATOR})


def success_judge(spec: JobSpec) -> tuple[Replica, str, str] | None:
    """(the pod whose success is the job's, condition reason, message); None: every worker must succeed."""
    if spec.replicas_of(k.CHIEF) > 0:
        return Replica(k.CHIEF, 0), "ChiefSucceeded", "chief 0 succeeded"
    if spec.replicas_of(k.LAUNCHER) > 0:
        return Replica(k.LAUNCHER, 0), "LauncherSucceeded", "launcher 0 (mpirun) succeeded"
    if spec.elastic is not None:
        return Replica(k.WORKER, 0), "Rank0Succeeded", "worker 0 succeeded (elastic: it hosts the rendezvous)"
    if spec.success_policy == "Rank0":
        return Replica(k.WORKER, 0), "Rank0Succeeded", "worker 0 succeeded (successPolicy Rank0)"
    return None


def restarts_alone(spec: JobSpec, pod: PodView) -> bool:
    """Whether a failure or disruption of `pod` replaces only that pod (else, by restartStrategy, the gang)."""
    if pod.role in OPTIONAL_ROLES:
        return True
    if spec.elastic is not None and pod.role == k.WORKER:
        return pod.index != 0
    return spec.failure_policy.restart_strategy == "Worker"


def tolerated(pod: PodView) -> bool:
    """A failure the job outlives: the pod is left Failed (or replaced alone) and the training goes on."""
    return pod.role in OPTIONAL_ROLES


def restart_policy_of(spec: JobSpec, role: str) -> str:
    """spec.roles.<role>.restartPolicy, else spec.restartPolicy."""
    role_spec = spec.roles.get(role)
    return role_spec.restart_policy if role_spec is not None and role_spec.restart_policy else spec.restart_policy
