"""The Optuna side of a sweep: a study rebuilt from the trials, the next trial's parameters, pruning decisions.

Why rebuilt, and from what: the operator may be killed at any moment, so the study lives in no process. Each
decision builds an in-memory study from the trial views (api objects): every trial is added with add_trial as a
FrozenTrial carrying its parameters, its state, its objective value, its per-epoch values (intermediate values)
and the system attributes the sampler and pruner gave it, which the trial keeps in an annotation. Trial numbers are
the trials' indexes (a missing index is filled with a failed trial without parameters), so Hyperband's brackets and
the samplers' per-trial seeds are the same after a restart. The sampler of trial n is seeded from the sweep's seed
and n: the same trials give the same sample.

What is not rebuilt from the API: CMA-ES stores its optimizer as a pickle in the trial's system attributes.
Unpickling text from an annotation anyone who may edit the TrainingJob can write would run their code in the
operator, so those attributes never leave the process (PRIVATE_PREFIXES); a restarted operator's CMA-ES re-derives
its optimizer from the recorded generations, one generation per sample (the tell is deterministic, so it catches
up to the same state; the few samples taken meanwhile come from an earlier generation's distribution).

This is the only module that imports Optuna (the `[sweeps]` extra); numpy and SQLAlchemy come with it.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState, create_trial

from trainingjob.api.sweep_phases import TrialState as SweepTrialState
from trainingjob.sweeps.trials import TrialView, trial_state
from trainingjob.sweeps.types import EarlyStopping, Parameter, TrainingSweep

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
# System attributes that stay in the operator's memory (see the module docstring): CMA-ES's pickled optimizer.
PRIVATE_PREFIXES = ("cma:optimizer",)
MAX_ATTRS_BYTES = 16 * 1024  # a larger attribute set is not kept on the trial (it would bloat every watch event)
STATES = {
    SweepTrialState.RUNNING: TrialState.RUNNING,
    SweepTrialState.SUCCEEDED: TrialState.COMPLETE,
    SweepTrialState.PRUNED: TrialState.PRUNED,
    SweepTrialState.STOPPED: TrialState.PRUNED,
    SweepTrialState.FAILED: TrialState.FAIL,
}


@dataclass(frozen=True)
class Sample:
    """The parameters of a new trial, the attributes to record on it, and those to keep in memory only."""

    params: dict[str, Any]
    attrs: dict[str, Any]
    private: dict[str, Any]


def distribution(parameter: Parameter) -> BaseDistribution:
    if parameter.type == "categorical":
        return CategoricalDistribution(list(parameter.choices))
    if parameter.type == "int":
        step = int(parameter.step or 1)
        return IntDistribution(int(parameter.low or 0), int(parameter.high or 0), log=parameter.log, step=step)
    low, high = float(parameter.low or 0), float(parameter.high or 0)
    return FloatDistribution(low, high, log=parameter.log, step=parameter.step)


def distributions(sweep: TrainingSweep) -> dict[str, BaseDistribution]:
    return {p.name: distribution(p) for p in sweep.spec.parameters}


def grid(sweep: TrainingSweep) -> dict[str, list[Any]]:
    """Every value of each parameter, for the grid sampler (the schema requires a step for float ranges)."""
    space: dict[str, list[Any]] = {}
    for parameter in sweep.spec.parameters:
        if parameter.type == "categorical":
            space[parameter.name] = list(parameter.choices)
            continue
        low, high = float(parameter.low or 0), float(parameter.high or 0)
        step = float(parameter.step or 1)
        count = math.floor((high - low) / step + 1e-9) + 1
        values = [low + i * step for i in range(count)]
        space[parameter.name] = [int(v) for v in values] if parameter.type == "int" else values
    return space


def trial_seed(sweep: TrainingSweep, number: int) -> int:
    return (sweep.seed * 1_000_003 + number) % (2**31 - 1)


def sampler(sweep: TrainingSweep, number: int) -> optuna.samplers.BaseSampler:
    """The sampler that samples trial `number`, seeded from the sweep and the number."""
    algorithm, seed = sweep.spec.algorithm, trial_seed(sweep, number)
    if algorithm.name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if algorithm.name == "grid":
        # The seed shuffles the grid itself (grid_id -> point): one seed for the whole sweep.
        return optuna.samplers.GridSampler(grid(sweep), seed=sweep.seed)
    if algorithm.name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=algorithm.startup_trials)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=algorithm.startup_trials)


def pruner(stopping: EarlyStopping) -> optuna.pruners.BasePruner:
    if stopping.pruner == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=stopping.startup_trials, n_warmup_steps=stopping.warmup_epochs
        )
    if stopping.pruner == "successiveHalving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=stopping.min_epochs, reduction_factor=stopping.reduction_factor
        )
    if stopping.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=stopping.min_epochs,
            max_resource=stopping.max_epochs or "auto",
            reduction_factor=stopping.reduction_factor,
        )
    return optuna.pruners.NopPruner()


def recorded_attrs(trial: TrialView) -> dict[str, Any]:
    """The system attributes recorded on the trial (JSON); anything unreadable or private is left out."""
    try:
        attrs = json.loads(trial.sampler_state) if trial.sampler_state else {}
    except ValueError:
        return {}
    if not isinstance(attrs, dict):
        return {}
    return {key: value for key, value in attrs.items() if not key.startswith(PRIVATE_PREFIXES)}


def frozen(
    sweep: TrainingSweep, trial: TrialView, dists: Mapping[str, BaseDistribution], private: Mapping[str, Any]
) -> FrozenTrial | None:
    """The trial as Optuna stores it; None when its parameters are not in the search space (edited by hand)."""
    metric = sweep.spec.objective.metric
    state, _ = trial_state(trial, metric)
    params = {name: trial.hyperparameters.get(name) for name in dists}
    if any(not _contains(dists[name], value) for name, value in params.items()):
        return None
    intermediate = {epoch: value for epoch, value in trial.series(metric) if math.isfinite(value)}
    value = trial.metrics.get(metric) if state is SweepTrialState.SUCCEEDED else None
    return create_trial(
        state=STATES[state],
        value=value,
        params=params,
        distributions=dict(dists),
        intermediate_values=intermediate,
        system_attrs={**recorded_attrs(trial), **private},
    )


def _contains(dist: BaseDistribution, value: Any) -> bool:
    try:
        return value is not None and dist._contains(dist.to_internal_repr(value))
    except (ValueError, TypeError, KeyError, IndexError):
        return False


def placeholder() -> FrozenTrial:
    """A failed trial without parameters, standing for an index no trial has (deleted): numbers stay indexes."""
    return create_trial(state=TrialState.FAIL)


def build_study(
    sweep: TrainingSweep,
    trials: Sequence[TrialView],
    number: int,
    private: Mapping[int, Mapping[str, Any]],
) -> optuna.Study:
    """The study of `trials` (by index, up to `number` exclusive) with the sweep's direction, the sampler of trial
    `number` and the sweep's pruner."""
    study = optuna.create_study(
        study_name=f"{sweep.namespace}/{sweep.name}",
        direction="maximize" if sweep.spec.objective.maximize else "minimize",
        sampler=sampler(sweep, number),
        pruner=pruner(sweep.spec.early_stopping),
    )
    dists = distributions(sweep)
    by_index = {trial.index: trial for trial in trials}
    for index in range(number):
        trial = by_index.get(index)
        entry = None if trial is None else frozen(sweep, trial, dists, private.get(index, {}))
        study.add_trial(entry or placeholder())
    return study


def ask(
    sweep: TrainingSweep, trials: Sequence[TrialView], number: int, private: Mapping[int, Mapping[str, Any]]
) -> Sample:
    """The parameters of trial `number`: the sampler's answer given every trial before it."""
    study = build_study(sweep, trials, number, private)
    trial = study.ask(fixed_distributions=distributions(sweep))
    attrs = dict(study.get_trials(deepcopy=False)[-1].system_attrs)
    kept = {key: value for key, value in attrs.items() if not key.startswith(PRIVATE_PREFIXES)}
    if len(json.dumps(kept)) > MAX_ATTRS_BYTES:
        kept = {}
    return Sample(
        params=dict(trial.params),
        attrs=kept,
        private={key: value for key, value in attrs.items() if key.startswith(PRIVATE_PREFIXES)},
    )


@dataclass(frozen=True)
class Judgement:
    """Whether to prune a running trial, and its system attributes afterwards (a pruner may record some)."""

    prune: bool
    attrs: dict[str, Any]


def judge(
    sweep: TrainingSweep, trials: Sequence[TrialView], trial: TrialView, private: Mapping[int, Mapping[str, Any]]
) -> Judgement:
    """Ask the pruner about `trial` at its newest epoch, with every other trial as the study holds them. The trial
    is added to the study as it is: its number is its index, so the study holds every trial up to it, the later
    ones after it."""
    number = max(t.index for t in trials) + 1
    study = build_study(sweep, trials, number, private)
    stored = study.get_trials(deepcopy=False)[trial.index]
    prune = bool(stored.last_step is not None and study.pruner.prune(study, stored))
    attrs = dict(study.get_trials(deepcopy=False)[trial.index].system_attrs)
    return Judgement(prune, {key: value for key, value in attrs.items() if not key.startswith(PRIVATE_PREFIXES)})
