"""framework name (spec.framework) -> its contract, and the env names those contracts inject."""

from __future__ import annotations

from trainingjob.frameworks.base import WORKER, ElasticRendezvous, Framework, WorkerContext
from trainingjob.frameworks.jax import Jax
from trainingjob.frameworks.mpi import Mpi
from trainingjob.frameworks.pytorch import PyTorch
from trainingjob.frameworks.tensorflow import TensorFlow
from trainingjob.frameworks.xgboost import XGBoost

FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (PyTorch(), TensorFlow(), XGBoost(), Jax(), Mpi())}


def framework_for(name: str) -> Framework:
    """The contract for `name`; KeyError for an unknown one (the schema's enum normally prevents that)."""
    return FRAMEWORKS[name]


def _sample_contexts() -> tuple[WorkerContext, ...]:
    """A single CPU worker, a multi-GPU gang, a pod of every other role and an elastic worker: between them every
    variable a framework ever sets appears."""
    hosts = ("w-0.svc", "w-1.svc")
    roles = {WORKER: hosts, **{role.name: (f"{role.name}-0.svc",) for f in FRAMEWORKS.values() for role in f.roles}}
    elastic = ElasticRendezvous(1, 2, 3, "j")
    port = 29500  # any: the names set do not depend on it
    return (
        WorkerContext("j", "ns", 0, 1, hosts[:1], port, 1, "gloo"),
        WorkerContext("j", "ns", 1, 2, hosts, port, 2, "nccl"),
        *(WorkerContext("j", "ns", 0, 2, hosts, port, 1, "gloo", role, roles) for role in roles),
        WorkerContext("j", "ns", 0, 2, hosts, port, 1, "gloo", elastic=elastic),
    )


def framework_env_names() -> tuple[str, ...]:
    """Every name some framework's worker_env sets, read from the frameworks themselves so it cannot drift."""
    names = {name for f in FRAMEWORKS.values() for ctx in _sample_contexts() for name in f.worker_env(ctx)}
    return tuple(sorted(names))
