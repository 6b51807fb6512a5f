"""The environment of a worker: framework contract, job identity, checkpoints, hyperparameters, user env."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.names import pod_host
from trainingjob.api.replicas import chief_replica, role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.builders.tracking import tracking_env, tracking_settings
from trainingjob.config import OperatorConfig
from trainingjob.frameworks.base import ElasticRendezvous, WorkerContext
from trainingjob.frameworks.registry import framework_for


def worker_context(job: TrainingJob, index: int, role: str = k.WORKER) -> WorkerContext:
    """What the framework needs to know about pod `index` of `role` and its peers."""
    spec = job.spec
    hosts = {
        name: tuple(pod_host(job.name, job.namespace, name, i) for i in range(count))
        for name, count in role_counts(spec).items()
    }
    elastic = spec.elastic
    return WorkerContext(
        job_name=job.name,
        namespace=job.namespace,
        index=index,
        workers=spec.workers,
        hosts=hosts[k.WORKER],
        port=spec.master_port,
        processes_per_worker=spec.processes_per_worker,
        backend=spec.backend,
        role=role,
        role_hosts=hosts if spec.has_roles else {},
        elastic=None
        if elastic is None
        else ElasticRendezvous(elastic.min_workers, elastic.max_workers, elastic.max_restarts, job.name),
    )


SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def hyperparameter_env_name(key: str) -> str:
    """learningRate -> HYPERPARAM_LEARNING_RATE; batch-size / batch.size -> HYPERPARAM_BATCH_SIZE."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)
    return "HYPERPARAM_" + re.sub(r"[^A-Za-z0-9]+", "_", snake).strip("_").upper()


def guide_hyperparameter_env_name(key: str) -> str | None:
    """Seed 002's name, `HYPERPARAM_{key.upper()}` (learningRate -> HYPERPARAM_LEARNINGRATE), which its launch
    script reads; None where that is no name a shell can read (a key with `.` or `-`: ours covers it)."""
    name = "HYPERPARAM_" + key.upper()
    return name if SHELL_NAME.match(name) else None


def hyperparameter_value(value: Any) -> str:
    """Booleans as true/false (what shells and argparse users expect), numbers as JSON writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def hyperparameter_env(hyperparameters: dict[str, Any]) -> dict[str, str]:
    """Our HYPERPARAM_<UPPER_SNAKE> per key, then the guide's HYPERPARAM_<UPPER> beside it where it differs.

    Ours win: a guide name that is another key's name of ours, or that two keys share, is left out, so adding the
    guide's names can neither change a value a job already reads nor make a valid job invalid."""
    ours = {hyperparameter_env_name(key): hyperparameter_value(hyperparameters[key]) for key in sorted(hyperparameters)}
    guide_names = {key: guide_hyperparameter_env_name(key) for key in sorted(hyperparameters)}
    claims = Counter(name for name in guide_names.values() if name is not None and name not in ours)
    guide = {
        name: hyperparameter_value(hyperparameters[key])
        for key, name in guide_names.items()
        if name is not None and claims[name] == 1
    }
    return {**ours, **guide}


def run_checkpoint_dir(job: TrainingJob) -> str:
    """CHECKPOINT_DIR: this run's own directory under the checkpoint mount, named by the job's uid.

    Why per run: the storage (a claim, or the PVC that outlives its job) is shared by every job that names it, and
    a job deleted and submitted again under the same name used to resume from the earlier run's newest
    checkpoint and prune its own as older. Starting from another run is spec.checkpoint.resumeFrom.
    """
    return _join(job.spec.checkpoint_path, job.uid)


def _storage_root(job: TrainingJob) -> str:
    """Where the checkpoint storage is: the mount in the workers, or an object store's URI."""
    storage = job.spec.checkpoint.storage
    if job.spec.checkpoint.enabled and storage is not None and not storage.is_volume and storage.path:
        return storage.path
    return job.spec.checkpoint_path


def _join(base: str, child: str) -> str:
    if not child or child == ".":
        return base
    return f"{base.rstrip('/')}/{child}"


def identity_env(job: TrainingJob, index: int, attempt: int, role: str = k.WORKER) -> dict[str, str]:
    spec = job.spec
    chief = chief_replica(spec)
    env = {
        "TRAININGJOB_NAME": job.name,
        "TRAININGJOB_NAMESPACE": job.namespace,
        "TRAININGJOB_FRAMEWORK": spec.framework,
        "TRAININGJOB_ROLE": role,
        "TRAININGJOB_IS_CHIEF": "true" if (role, index) == (chief.role, chief.index) else "false",
        "TRAININGJOB_WORKER_INDEX": str(index),
        "TRAININGJOB_WORLD_SIZE": str(spec.workers),
        "TRAININGJOB_RESTART_COUNT": str(attempt),
        "TRAININGJOB_HYPERPARAMETERS_FILE": f"{k.CONFIG_MOUNT_PATH}/{k.HYPERPARAMETERS_FILE}",
        "DISTRIBUTED_BACKEND": spec.backend,
        "CHECKPOINT_DIR": run_checkpoint_dir(job),
        "CHECKPOINT_INTERVAL": str(spec.checkpoint_every),
        "RESUME_FROM_CHECKPOINT": resume_from(job, attempt),
        "TRAININGJOB_GRACE_PERIOD_SECONDS": str(spec.termination_grace_period_seconds),
        **guide_env(job, role),
    }
    if spec.checkpoint.keep_last:
        env["CHECKPOINT_KEEP_LAST"] = str(spec.checkpoint.keep_last)
    storage = spec.checkpoint.storage
    if spec.checkpoint.enabled and storage is not None and not storage.is_volume and storage.path:
        # s3/gcs: the training code writes there with its own client, into this run's own prefix
        env["CHECKPOINT_URI"] = _join(storage.path, job.uid)
    if spec.data_volume is not None:
        env["DATA_DIR"] = spec.data_volume.mount_path
    if spec.model:
        env["MODEL"] = spec.model
    if spec.dataset:
        env["DATASET"] = spec.dataset
    return env


def resume_from(job: TrainingJob, attempt: int) -> str:
    """RESUME_FROM_CHECKPOINT: on a later attempt the newest checkpoint's path the workers reported
    (status.lastCheckpoint; seed 002's operator sets the variable to it); else the earlier run's checkpoint that
    spec.checkpoint.resumeFrom names (every attempt: the SDK takes this run's own newest one once it has one); else
    true on a later attempt and false on the first. trainingjob.sdk resumes on a path as on true; the value is only
    ever an environment variable's value, never run or parsed here."""
    if attempt > 0:
        path = (job.status.last_checkpoint or {}).get("path")
        if isinstance(path, str) and path.strip():
            return path
    source = job.spec.checkpoint.resume_from
    if source:
        return _join(_storage_root(job), source.rstrip("/"))
    return "true" if attempt > 0 else "false"


def guide_env(job: TrainingJob, role: str) -> dict[str, str]:
    """Seed 002's names for what we already pass (its launch script and train.py read these)."""
    return {
        "NUM_WORKERS": str(job.spec.workers),
        "GPUS_PER_WORKER": str(job.spec.gpus_of(role)),  # this pod's GPUs: the launch script's --nproc_per_node
        "CHECKPOINT_FREQUENCY": str(job.spec.checkpoint_every),  # = CHECKPOINT_INTERVAL
    }


def downward_env() -> list[dict[str, Any]]:
    """Seed 002's POD_NAME and POD_IP from the downward API, before the user's env, which may use $(POD_NAME)."""
    return [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (("POD_NAME", "metadata.name"), ("POD_IP", "status.podIP"))
    ]


def progress_env(config: OperatorConfig | None) -> dict[str, str]:
    """Where and how to report progress (docs/progress-protocol.md); nothing when the endpoint is off."""
    if config is None or not config.progress_url:
        return {}
    return {
        "TRAININGJOB_PROGRESS_URL": config.progress_url,
        "TRAININGJOB_PROGRESS_CA_FILE": f"{k.CONFIG_MOUNT_PATH}/{k.PROGRESS_CA_FILE}",
        "TRAININGJOB_PROGRESS_TOKEN_FILE": f"{k.PROGRESS_TOKEN_DIR}/token",
    }


def user_env(job: TrainingJob, role: str) -> list[dict[str, Any]]:
    """spec.env, with a role's own env (spec.roles.<role>.env) over it by name."""
    role_spec = job.spec.roles.get(role)
    if role_spec is None or not role_spec.env:
        return list(job.spec.env)
    overridden = {entry.get("name") for entry in role_spec.env}
    return [entry for entry in job.spec.env if entry.get("name") not in overridden] + list(role_spec.env)


def worker_env(
    job: TrainingJob, index: int, attempt: int, config: OperatorConfig | None = None, role: str = k.WORKER
) -> list[dict[str, Any]]:
    """Ours first, the user's last: user values may then refer to ours with $(NAME) expansion."""
    framework = framework_for(job.spec.framework)
    ours = {
        **framework.worker_env(worker_context(job, index, role)),
        **identity_env(job, index, attempt, role),
        **progress_env(config),
        **tracking_env(tracking_settings(job, config.mlflow_tracking_uri if config is not None else None)),
        **hyperparameter_env(job.spec.hyperparameters),
    }
    return [{"name": name, "value": value} for name, value in ours.items()] + downward_env() + user_env(job, role)
