"""The typed view of a TrainingSweep (api/schema_sweep.py), with the schema's defaults, read once at the boundary.

Optuna is not imported here: the operator reads sweeps (and says that it cannot run them) without the `[sweeps]`
extra installed.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.sweep_phases import SweepPhase, sweep_phase
from trainingjob.kube.meta import object_meta


@dataclass(frozen=True)
class Parameter:
    """One hyperparameter of the search space."""

    name: str
    type: str  # float, int or categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Parameter:
        return cls(
            name=str(raw.get("name", "")),
            type=str(raw.get("type", "float")),
            low=raw.get("min"),
            high=raw.get("max"),
            log=bool(raw.get("log", False)),
            step=raw.get("step"),
            choices=tuple(raw.get("values") or ()),
        )


@dataclass(frozen=True)
class Objective:
    metric: str
    maximize: bool = True
    goal: float | None = None

    def better(self, a: float, b: float) -> bool:
        """Whether value `a` is better than `b`."""
        return a > b if self.maximize else a < b

    def reached(self, value: float) -> bool:
        """Whether `value` reaches the goal (never, without one)."""
        if self.goal is None:
            return False
        return value >= self.goal if self.maximize else value <= self.goal


@dataclass(frozen=True)
class Algorithm:
    name: str = "tpe"
    seed: int | None = None
    startup_trials: int = 4


@dataclass(frozen=True)
class EarlyStopping:
    pruner: str = "median"
    startup_trials: int = 2
    warmup_epochs: int = 1
    min_epochs: int = 1
    max_epochs: int | None = None
    reduction_factor: int = 3


@dataclass(frozen=True)
class SweepSpec:
    template_spec: Mapping[str, Any]
    template_labels: Mapping[str, str]
    template_annotations: Mapping[str, str]
    parameters: tuple[Parameter, ...]
    objective: Objective
    algorithm: Algorithm
    early_stopping: EarlyStopping
    max_trials: int = 10
    parallelism: int = 1
    max_failed_trials: int = 3

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> SweepSpec:
        template = spec.get("trialTemplate") or {}
        metadata = template.get("metadata") or {}
        objective = spec.get("objective") or {}
        algorithm = spec.get("algorithm") or {}
        stopping = spec.get("earlyStopping") or {}
        return cls(
            template_spec=dict(template.get("spec") or {}),
            template_labels=dict(metadata.get("labels") or {}),
            template_annotations=dict(metadata.get("annotations") or {}),
            parameters=tuple(Parameter.from_dict(p) for p in spec.get("parameters") or ()),
            objective=Objective(
                metric=str(objective.get("metric", "")),
                maximize=objective.get("direction", "maximize") == "maximize",
                goal=objective.get("goal"),
            ),
            algorithm=Algorithm(
                name=algorithm.get("name", "tpe"),
                seed=algorithm.get("seed"),
                startup_trials=int(algorithm.get("startupTrials", 4)),
            ),
            early_stopping=EarlyStopping(
                pruner=stopping.get("pruner", "median") if "earlyStopping" in spec else "none",
                startup_trials=int(stopping.get("startupTrials", 2)),
                warmup_epochs=int(stopping.get("warmupEpochs", 1)),
                min_epochs=int(stopping.get("minEpochs", 1)),
                max_epochs=stopping.get("maxEpochs"),
                reduction_factor=int(stopping.get("reductionFactor", 3)),
            ),
            max_trials=int(spec.get("maxTrials", 10)),
            parallelism=int(spec.get("parallelism", 1)),
            max_failed_trials=int(spec.get("maxFailedTrials", 3)),
        )


@dataclass(frozen=True)
class TrainingSweep:
    namespace: str
    name: str
    uid: str
    generation: int
    labels: Mapping[str, str]
    spec: SweepSpec
    status: Mapping[str, Any]
    deleting: bool = False
    creation_timestamp: str | None = None
    raw_spec: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def phase(self) -> SweepPhase | None:
        """The phase written last; None while none is (or one this operator does not know)."""
        return sweep_phase(self.status)

    @property
    def seed(self) -> int:
        """The sampler's seed: spec.algorithm.seed, else one derived from the uid (stable for the sweep's life)."""
        if self.spec.algorithm.seed is not None:
            return int(self.spec.algorithm.seed)
        return zlib.crc32(self.uid.encode()) & 0x7FFFFFFF

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TrainingSweep:
        meta = object_meta(body)
        spec = body.get("spec") or {}
        return cls(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            generation=meta.generation,
            labels=meta.labels,
            spec=SweepSpec.from_dict(spec),
            status=dict(body.get("status") or {}),
            deleting=meta.deleting,
            creation_timestamp=meta.creation_timestamp,
            raw_spec=spec,
            annotations=meta.annotations,
        )


def trial_name(sweep: str, index: int) -> str:
    return f"{sweep}{c.TRIAL_SUFFIX}{index}"
