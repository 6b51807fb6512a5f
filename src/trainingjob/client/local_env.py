"""The environment of a worker process of the local backend (pure): the contract the operator gives a pod, with
every peer on 127.0.0.1 and the job's files in a local directory.

Built from the operator's own pieces (the framework module's worker_env, builders/env.py's identity and
hyperparameter variables), so a training function sees the same names on a laptop as on the cluster: RANK,
WORLD_SIZE, MASTER_ADDR/MASTER_PORT and PET_* (PyTorch), JAX_*, DMLC_* (XGBoost), TRAININGJOB_*, CHECKPOINT_DIR,
HYPERPARAM_*. Only what needs one host differs: addresses, the rendezvous port, the paths, the progress URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainingjob.api.types import TrainingJob
from trainingjob.builders.env import hyperparameter_env, identity_env
from trainingjob.client.errors import TrainingClientError
from trainingjob.frameworks.base import WorkerContext
from trainingjob.frameworks.registry import framework_for

LOOPBACK = "127.0.0.1"
# Frameworks whose workers would all bind the same port on one host: TensorFlow gives every worker the same port
# in TF_CONFIG; MPI starts its ranks through mpirun and ssh from a launcher pod.
ONE_WORKER_ONLY = ("tensorflow",)
NOT_LOCAL = ("mpi",)


@dataclass(frozen=True)
class LocalPaths:
    """Where one local run keeps its files."""

    directory: Path

    @property
    def code(self) -> Path:
        return self.directory / "code"

    @property
    def checkpoints(self) -> Path:
        return self.directory / "checkpoints"

    @property
    def hyperparameters(self) -> Path:
        return self.directory / "hyperparameters.json"

    def token(self, index: int) -> Path:
        return self.directory / "tokens" / f"worker-{index}"

    def log(self, index: int) -> Path:
        return self.directory / "logs" / f"worker-{index}.log"


def check_runnable(job: TrainingJob) -> None:
    """Refuse what cannot run as processes of one machine, saying why."""
    spec = job.spec
    if spec.framework in NOT_LOCAL:
        raise TrainingClientError(f"the local backend cannot run {spec.framework} jobs (mpirun over ssh needs pods)")
    if spec.framework in ONE_WORKER_ONLY and spec.workers > 1:
        raise TrainingClientError(
            f"the local backend runs {spec.framework} with 1 worker only: its workers would share one port on one host"
        )
    if spec.has_roles or spec.elastic is not None:
        raise TrainingClientError("the local backend runs a plain gang of workers: no roles, no elastic range")
    if any("valueFrom" in entry for entry in spec.env):
        raise TrainingClientError("the local backend takes env values only (valueFrom needs a cluster)")


def worker_environment(
    job: TrainingJob,
    index: int,
    attempt: int,
    port: int,
    paths: LocalPaths,
    progress_url: str,
) -> dict[str, str]:
    """The variables worker `index` gets, ours first and the user's last (as on the cluster)."""
    spec = job.spec
    context = WorkerContext(
        job_name=job.name,
        namespace=job.namespace,
        index=index,
        workers=spec.workers,
        hosts=(LOOPBACK,) * spec.workers,
        port=port,
        processes_per_worker=spec.processes_per_worker,
        backend=spec.backend,
    )
    env: dict[str, str] = {
        **framework_for(spec.framework).worker_env(context),
        **identity_env(job, index, attempt),
        "CHECKPOINT_DIR": str(paths.checkpoints),
        "TRAININGJOB_HYPERPARAMETERS_FILE": str(paths.hyperparameters),
        "TRAININGJOB_PROGRESS_URL": progress_url,
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(paths.token(index)),
        "PYTHONUNBUFFERED": "1",
        **hyperparameter_env(spec.hyperparameters),
    }
    env.update(user_values(spec.env))
    return env


def user_values(entries: list[dict[str, object]]) -> Mapping[str, str]:
    return {str(entry["name"]): str(entry.get("value", "")) for entry in entries if "name" in entry}
