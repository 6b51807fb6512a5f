"""The one small interface every ML framework implements: the environment (and files) its launcher expects.

Adding a framework means adding a module with a class like these and registering it in `registry.py`; no other
framework, builder or the planner changes (Kubeflow Trainer's plugin idea, without the plugin machinery).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class WorkerContext:
    """Everything a framework may need to know about one worker and its peers."""

    job_name: str
    namespace: str
    index: int
    workers: int
    hosts: tuple[str, ...]
    port: int
    processes_per_worker: int
    backend: str

    @property
    def master_host(self) -> str:
        return self.hosts[0]


class Framework(Protocol):
    """An ML framework's distributed contract."""

    name: str

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
