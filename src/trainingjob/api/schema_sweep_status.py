"""The schema of TrainingSweep.status, written only by the sweep controller (operator/trainingsweep/).

Bounded: one short entry per trial (at most maxTrials, itself at most MAX_SWEEP_TRIALS), the best trial's
parameters, and conditions. Per-epoch values stay on the trials (status.progress.history): the sweep's status is
read by every `kubectl get` and must not grow with epochs.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, integer, node, obj, string
from trainingjob.api.sweep_phases import SweepPhase, TrialState

TRIAL_STATES = tuple(state.value for state in TrialState)
SWEEP_PHASES = tuple(phase.value for phase in SweepPhase)
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _parameters(description: str) -> Schema:
    value = node(
        None,
        "The sampled value: a string, number or boolean.",
        preserve_unknown=True,
        min_properties=1,
        max_properties=0,
        min_items=1,
        max_items=0,
    )
    return node("object", description, additional_properties=value, max_properties=c.MAX_SWEEP_PARAMETERS)


def _trial() -> Schema:
    return obj(
        "One trial as the sweep last saw it.",
        {
            "name": string("The TrainingJob of the trial (<sweep>-trial-<index>)."),
            "index": integer("The trial's number, from 0 in order of creation.", minimum=0),
            "state": string(
                "Running (created, not finished), Succeeded (finished and reported the objective), Pruned "
                "(stopped early by the pruner), Failed (the job failed, or finished without reporting the "
                "objective) or Stopped (stopped because the sweep ended first).",
                enum=list(TRIAL_STATES),
            ),
            "parameters": _parameters("The sampled hyperparameters."),
            "value": node("number", "The objective's value: its last report (for a pruned trial, at pruning)."),
            "epochs": integer("Epochs the trial reported (its status.progress.epoch).", minimum=0),
            "reason": string("Why it failed, was pruned or stopped, in a few words.", max_length=256),
        },
        required=["name", "index", "state"],
    )


def _best() -> Schema:
    return obj(
        "The trial with the best objective value so far among the succeeded ones (pruned trials' partial values "
        "are not compared).",
        {
            "name": string("The TrainingJob of the best trial."),
            "index": integer("Its number.", minimum=0),
            "value": node("number", "Its objective value."),
            "parameters": _parameters("Its hyperparameters."),
        },
        required=["name", "value"],
    )


def _condition() -> Schema:
    return obj(
        "A condition of the sweep: Running, Complete or Failed (metav1.Condition's shape).",
        {
            "type": string("Condition type."),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string("One-word reason in CamelCase.", pattern=CONDITION_REASON, max_length=1024),
            "message": string("What happened, for people.", max_length=32768),
            "lastTransitionTime": string("When the status last changed.", format="date-time"),
            "observedGeneration": integer("The generation the condition was computed from."),
        },
        required=["type", "status"],
    )


def status_schema() -> Schema:
    def count(description: str) -> Schema:
        return integer(description, minimum=0)

    return obj(
        "Observed state, written by the operator only.",
        {
            "phase": string(
                "Pending (no trial yet, or no sweep controller), Running, Succeeded (maxTrials finished, or the "
                "goal reached) or Failed (see the Failed condition).",
                enum=list(SWEEP_PHASES),
            ),
            "observedGeneration": integer("The spec generation this status describes."),
            "startTime": string("When the first trial was created.", format="date-time"),
            "completionTime": string("When the sweep ended.", format="date-time"),
            "trialsCreated": count("Trials created so far."),
            "trialsRunning": count("Trials not finished."),
            "trialsSucceeded": count("Trials that finished and reported the objective."),
            "trialsPruned": count("Trials stopped early by the pruner."),
            "trialsFailed": count("Trials that failed (maxFailedTrials counts these)."),
            "trialsStopped": count("Trials stopped because the sweep ended first."),
            "trialsDone": count("Trials that are not running: succeeded, pruned, failed or stopped."),
            "bestTrial": _best(),
            "trials": array("Every trial, by index.", _trial(), max_items=c.MAX_SWEEP_TRIALS),
            "conditions": array(
                "Running, Complete and Failed.", _condition(), list_type="map", list_map_keys=["type"], max_items=8
            ),
        },
    )
