"""The one small interface every ML framework implements: the environment (and files) its launcher expects.

Adding a framework means adding a module with a class like these and registering it in `registry.py`; no other
framework, builder or the planner changes (Kubeflow Trainer's plugin idea, without the plugin machinery).

The frameworks are the lowest layer above the ground floor: they import nothing else of trainingjob, and the API
(api/constants.py) takes their role names and reserved environment variables from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

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


class Framework(Protocol):
    """An ML framework's distributed contract."""

    name: str
    # The roles other than worker this framework's jobs may have (spec.roles), e.g. MPI's launcher.
    roles: tuple[str, ...]

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        """Environment variables for one worker, in the order they should appear."""
        ...

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        """Extra files for the job's ConfigMap (mounted at /etc/trainingjob); the same for every worker."""
        ...


class NoConfigFiles:
    """Mixin for frameworks whose contract is environment only."""

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        return {}
