"""What a pod's role means to the planner: who judges success, whose failure replaces whom, whose failure is
tolerated. Pure functions of the spec and the pod, beside the restart policies they refine.

What a role means to its framework is the framework's to say (frameworks/base.py): whose success is the job's
(TensorFlow's chief, MPI's launcher: `success_rule`) and which roles the training can do without (TensorFlow's
evaluator: `optional_roles`). On top of that:
- Elastic PyTorch: worker 0 hosts the c10d rendezvous, so it judges success and losing it restarts every worker;
  any other worker is replaced alone while torchrun's agents re-rendezvous without it.
- successPolicy Rank0: worker 0 judges success.
"""

from __future__ import annotations

from trainingjob.api import constants as k
from trainingjob.api.replicas import Replica
from trainingjob.api.types import JobSpec
from trainingjob.frameworks.base import Framework, Plugin
from trainingjob.frameworks.registry import FRAMEWORKS
from trainingjob.reconcile.observed import PodView

UNKNOWN_FRAMEWORK = Plugin()  # what a spec the planner rejects (InvalidSpec) would get: no special role


def framework_of(spec: JobSpec) -> Framework | Plugin:
    return FRAMEWORKS.get(spec.framework, UNKNOWN_FRAMEWORK)


def optional_roles(spec: JobSpec) -> frozenset[str]:
    """Roles the training can do without: not needed for the job to be Running, their failure never fails the job."""
    return framework_of(spec).optional_roles


def success_judge(spec: JobSpec) -> tuple[Replica, str, str] | None:
    """(the pod whose success is the job's, condition reason, message); None: every worker must succeed."""
    framework = framework_of(spec)
    rule = framework.success_rule({role.name: spec.replicas_of(role.name) for role in framework.roles})
    if rule is not None:
        return Replica(rule.role, rule.index), rule.reason, rule.message
    if spec.elastic is not None:
        return Replica(k.WORKER, 0), "Rank0Succeeded", "worker 0 succeeded (elastic: it hosts the rendezvous)"
    if spec.success_policy == "Rank0":
        return Replica(k.WORKER, 0), "Rank0Succeeded", "worker 0 succeeded (successPolicy Rank0)"
    return None


def restarts_alone(spec: JobSpec, pod: PodView) -> bool:
    """Whether a failure or disruption of `pod` replaces only that pod (else, by restartStrategy, the gang)."""
    if pod.role in optional_roles(spec):
        return True
    if spec.elastic is not None and pod.role == k.WORKER:
        return pod.index != 0
    return spec.failure_policy.restart_strategy == "Worker"


def failure_detail(spec: JobSpec, pod: PodView) -> str | None:
    """Why `pod` failed in its framework's terms (MPI's launcher: which rank ended mpirun), for the failure's
    message; None when the framework cannot tell."""
    return framework_of(spec).failure_detail(pod.role, pod.message)


def tolerated(spec: JobSpec, pod: PodView) -> bool:
    """A failure the job outlives: the pod is left Failed (or replaced alone) and the training goes on."""
    return pod.role in optional_roles(spec)


def restart_policy_of(spec: JobSpec, role: str) -> str:
    """spec.roles.<role>.restartPolicy, else spec.restartPolicy."""
    role_spec = spec.roles.get(role)
    return role_spec.restart_policy if role_spec is not None and role_spec.restart_policy else spec.restart_policy
