"""A TrainingSweep the API server let through but the operator cannot run ends Failed, with an Event, before any
trial exists; a trial's untrusted status cannot break the planner (pure: no server)."""

from __future__ import annotations

from tests.sweep_support import NOW, finished, sweep, views, with_status
from trainingjob.sweeps import study
from trainingjob.sweeps.planner import ObservedSweep, plan_sweep
from trainingjob.sweeps.trials import trial_view


def plan(sweep_object, trials=(), **observed):
    return plan_sweep(sweep_object, ObservedSweep(trials=views(trials), **observed), study, NOW)


def failed_condition(status: dict) -> dict:
    return next(c for c in status["conditions"] if c["type"] == "Failed")


def test_a_categorical_parameter_without_values_fails_the_sweep_as_invalid_spec() -> None:
    bad = sweep(parameters=[{"name": "booster", "type": "categorical"}, {"name": "d", "type": "int", "values": [1]}])
    result = plan(bad)
    assert result.creates == [] and result.status["phase"] == "Failed"
    condition = failed_condition(result.status)
    assert condition["reason"] == "InvalidSpec"
    assert "booster: a categorical parameter needs values" in condition["message"]
    assert "d: a int range takes min and max, not values" in condition["message"]
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "InvalidSpec")]


def test_repeated_choices_and_an_endless_grid_are_invalid() -> None:
    repeated = sweep(parameters=[{"name": "booster", "type": "categorical", "values": ["gbtree", "gbtree"]}])
    assert "values must be distinct" in failed_condition(plan(repeated).status)["message"]
    huge = sweep(
        algorithm={"name": "grid"},
        parameters=[{"name": n, "type": "float", "min": 0, "max": 1, "step": 0.001} for n in ("a", "b")],
    )
    assert "more than 100000 points" in failed_condition(plan(huge).status)["message"]


def test_a_trial_the_api_server_refused_fails_the_sweep_and_it_stays_failed_after_a_restart() -> None:
    refused = plan(sweep(), rejection="TrainingJob digits-trial-0 was rejected: spec.image: Required value")
    assert refused.status["phase"] == "Failed" and refused.creates == []
    assert failed_condition(refused.status)["reason"] == "InvalidTemplate"
    # A restarted operator has no memory of the refusal: the status written says it, and nothing is retried.
    restarted = plan(with_status(sweep(), refused.status))
    assert restarted.creates == [] and restarted.status["phase"] == "Failed"
    assert restarted.events == [], "the end is told once"


def test_no_more_than_parallelism_trials_run_at_once() -> None:
    first = plan(sweep(parallelism=3, maxTrials=5))
    assert len(first.creates) == 3
    running = [finished(m, [0.5], phase="Running", total=6) for m in first.creates]
    assert plan(sweep(parallelism=3, maxTrials=5), running).creates == []
    done = [finished(first.creates[0], [0.5, 0.6]), *running[1:]]
    assert [m["metadata"]["name"] for m in plan(sweep(parallelism=3, maxTrials=5), done).creates] == ["digits-trial-3"]


def test_a_trials_untrusted_history_and_metrics_are_read_defensively() -> None:
    body = finished(plan(sweep()).creates[0], [0.5, 0.6])
    body["status"]["progress"]["history"]["accuracy"] += [{"epoch": "3", "value": 1}, "junk", {"value": 0.9}]
    body["status"]["progress"]["metrics"]["loss"] = "<script>"
    view = trial_view(body)
    assert view is not None
    assert view.series("accuracy") == ((1, 0.5), (2, 0.6))
    assert "loss" not in view.metrics


def test_a_sweep_that_ended_does_not_start_over_when_its_trials_go_until_its_spec_changes() -> None:
    """Deleting a namespace may delete the trials before their sweep: judged from no trials, it would start over."""
    first = plan(sweep(maxTrials=2))
    done = [finished(first.creates[0], [0.5, 0.7]), finished(first.creates[1], [0.4, 0.6])]
    ended = plan(sweep(maxTrials=2), done)
    assert ended.status["phase"] == "Succeeded" and ended.creates == []
    gone = plan(with_status(sweep(maxTrials=2), ended.status), [])
    assert gone.creates == [] and gone.status["phase"] == "Succeeded" and gone.events == []
    # A larger maxTrials is a new generation: the sweep goes on with the next index.
    more = with_status(sweep(maxTrials=4), ended.status)
    more = type(more)(**{**more.__dict__, "generation": 2})
    assert [m["metadata"]["name"] for m in plan(more, done).creates] == ["digits-trial-2", "digits-trial-3"]
