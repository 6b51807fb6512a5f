"""framework name (spec.framework) -> its contract."""

from __future__ import annotations

from trainingjob.frameworks.base import Framework
from trainingjob.frameworks.jax import Jax
from trainingjob.frameworks.mpi import Mpi
from trainingjob.frameworks.pytorch import PyTorch
from trainingjob.frameworks.tensorflow import TensorFlow
from trainingjob.frameworks.xgboost import XGBoost

FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (PyTorch(), TensorFlow(), XGBoost(), Jax(), Mpi())}


def framework_for(name: str) -> Framework:
    """The contract for `name`; KeyError for an unknown one (the schema's enum normally prevents that)."""
    return FRAMEWORKS[name]
