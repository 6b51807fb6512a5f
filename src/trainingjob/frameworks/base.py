"""The one small interface every ML framework implements: the environment (and files) its launcher expects, and
hooks where it differs from a gang of equal workers: the roles it adds (described for the CRD schema), children
it adds, what it changes in a pod, whose success is the job's, which roles the training can do without.

Adding a framework means adding a module with a class like these and registering it in `registry.py`; no other
framework, builder or the planner changes (Kubeflow Trainer v2's idea of plugins for MLPolicy, component builders
and terminal conditions, without its machinery). Builders call worker_env, config_files, children and pod_changes
(builders/env.py, configmap.py, pod.py); the planner asks success_rule and optional_roles (reconcile/roles.py).

The frameworks are the lowest layer above the ground floor: they import nothing else of trainingjob, and the API
(api/constants.py) takes their role names and reserved environment variables from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

WORKER = "worker"
# Where every pod mounts the job's ConfigMap, with each framework's config_files().
CONFIG_DIR = "/etc/trainingjob"


@dataclass(frozen=True)
class ElasticRendezvous:
    """torchrun's elastic settings: the node count range, the agents' restart budget, the rendezvous run id."""

    min_nodes: int
    max_nodes: int
    max_restarts: int
    run_id: str


@dataclass(frozen=True)
class WorkerContext:
    """Everything a framework may need to know about one pod and its peers.

    `index` is the pod's index within its `role`; `workers` and `hosts` are the worker role's. `role_hosts` has the
    hosts of every role the job has (worker included) when it has more than workers; empty, the job is one gang
    of workers (the contract every framework started with)."""

    job_name: str
    namespace: str
    index: int
    workers: int
    hosts: tuple[str, ...]
    port: int
    processes_per_worker: int
    backend: str
    role: str = WORKER
    role_hosts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    elastic: ElasticRendezvous | None = None

    @property
    def master_host(self) -> str:
        return self.hosts[0]

    def hosts_of(self, role: str) -> tuple[str, ...]:
        if role == WORKER:
            return self.hosts
        return tuple(self.role_hosts.get(role, ()))


@dataclass(frozen=True)
class Role:
    """A role other than worker that a framework's jobs may have (spec.roles.<name>). The API takes everything it
    knows of roles from these (api/constants.py, api/schema_roles.py), so a framework's roles live in its module."""

    name: str
    # spec.roles.<name>'s description in the CRD schema (`kubectl explain`), in the framework's words.
    description: str
    # At most one pod of this role (TensorFlow's chief and evaluator, MPI's launcher).
    single: bool = False
    # Where this role's pods come among a job's, the workers' being 0: negative before them (the coordinator
    # first), positive after; roles of the same order keep the registry's.
    order: int = -1
    # The job's chief when it has this role: the pod that reports progress and should save checkpoints
    # (TRAININGJOB_IS_CHIEF); without one, worker 0 is.
    chief: bool = False


@dataclass(frozen=True)
class PodChanges:
    """What a framework changes in a pod the builder makes: volumes and mounts it adds (after the operator's own,
    before the user's), and a command that replaces the pod's own (None: the role's command stays)."""

    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] = ()
    # The container's terminationMessagePolicy (None: the API server's default, File): FallbackToLogsOnError makes
    # a failed container's log tail its termination message, which failure_detail then reads.
    termination_message_policy: str | None = None


@dataclass(frozen=True)
class SuccessRule:
    """The pod whose success is the job's (by role and index), and the Succeeded condition's reason and message."""

    role: str
    index: int
    reason: str
    message: str


class Framework(Protocol):
    """An ML framework's distributed contract, and the hooks where it differs from a gang of equal workers."""

    name: str
    # The roles other than worker this framework's jobs may have (spec.roles), e.g. MPI's launcher.
    roles: tuple[Role, ...]
    # Roles the training can do without: not needed for the job to be Running, their failure never fails the job
    # and never restarts the gang (TensorFlow's evaluator).
    optional_roles: frozenset[str]

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        """Environment variables for one worker, in the order they should appear."""
        ...

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        """Extra files for the job's ConfigMap (mounted at CONFIG_DIR); the same for every worker."""
        ...

    def children(self, context: WorkerContext) -> list[dict[str, Any]]:
        """Children the job gets with its workers, created when workers are (AlreadyExists keeps the first): whole
        manifests whose metadata holds only a name; the builder makes them the job's (labels, ownerReference)."""
        ...

    def pod_changes(self, context: WorkerContext) -> PodChanges:
        """What this framework changes in the pod of `context`."""
        ...

    def success_rule(self, replicas: Mapping[str, int]) -> SuccessRule | None:
        """Whose success is the job's, given how many pods of each of this framework's roles the job has; None: the
        workers' (or the spec's successPolicy) decide."""
        ...

    def failure_detail(self, role: str, message: str | None) -> str | None:
        """What a failed pod of `role` says about why, in this framework's terms, from its termination message
        (untrusted: the container's own words); None: nothing beyond its exit code."""
        ...


class Plugin:
    """What every hook does for a framework that does not override it: a gang of equal workers, environment
    only."""

    roles: tuple[Role, ...] = ()
    optional_roles: frozenset[str] = frozenset()

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        return {}

    def children(self, context: WorkerContext) -> list[dict[str, Any]]:
        return []

    def pod_changes(self, context: WorkerContext) -> PodChanges:
        return PodChanges()

    def success_rule(self, replicas: Mapping[str, int]) -> SuccessRule | None:
        return None

    def failure_detail(self, role: str, message: str | None) -> str | None:
        return None
