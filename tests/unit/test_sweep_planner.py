"""The TrainingSweep planner with Optuna's real samplers and pruners (pure: no server, no operator)."""

from __future__ import annotations

import json

from tests.sweep_support import NOW, SWEEP_UID, finished, sweep, views, with_status
from trainingjob.api import constants as c
from trainingjob.sweeps import study
from trainingjob.sweeps.planner import ObservedSweep, plan_sweep
from trainingjob.sweeps.trials import TrialState, trial_state


def plan(sweep_object, trials=(), **observed):
    return plan_sweep(sweep_object, ObservedSweep(trials=views(trials), **observed), study, NOW)


def test_the_first_plan_creates_parallelism_trials_named_owned_and_labelled() -> None:
    first = plan(sweep())
    assert [m["metadata"]["name"] for m in first.creates] == ["digits-trial-0", "digits-trial-1"]
    trial = first.creates[0]
    assert trial["apiVersion"] == c.WATCHED_API_VERSION and trial["kind"] == c.KIND
    owner = trial["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        c.SWEEP_KIND,
        SWEEP_UID,
        True,
        True,
    )
    assert trial["metadata"]["labels"][c.LABEL_SWEEP] == "digits"
    assert trial["metadata"]["labels"][c.LABEL_TRIAL_INDEX] == "0"
    assert trial["metadata"]["annotations"][c.ANNOTATION_METRIC_HISTORY] == "accuracy"
    hyperparameters = trial["spec"]["hyperparameters"]
    assert hyperparameters["dataset"] == "digits" and hyperparameters["epochs"] == 6, "the template's stay"
    assert 0.01 <= hyperparameters["learningRate"] <= 0.5
    assert isinstance(hyperparameters["maxDepth"], int) and 1 <= hyperparameters["maxDepth"] <= 6
    # Counted once the API server holds them (the next pass): a refused creation keeps its index.
    assert first.status["phase"] == "Running" and first.status["trialsCreated"] == 0
    assert [t["name"] for t in first.status["trials"]] == ["digits-trial-0", "digits-trial-1"]


def test_samples_are_the_same_for_the_same_trials_so_a_restart_samples_nothing_new() -> None:
    """A restarted operator plans from the trials alone: the same inputs give the same trials."""
    first = plan(sweep())
    again = plan(sweep())
    assert first.creates == again.creates
    done = [finished(first.creates[0], [0.5, 0.7, 0.8]), finished(first.creates[1], [0.4, 0.5, 0.6])]
    after = plan(sweep(), done)
    assert [m["metadata"]["name"] for m in after.creates] == ["digits-trial-2", "digits-trial-3"]
    assert plan(sweep(), done).creates == after.creates


def test_no_trial_is_sampled_while_one_created_is_missing_from_the_cache() -> None:
    first = plan(sweep())
    waiting = plan(sweep(), [], pending_creations=frozenset({"digits-trial-0"}))
    assert waiting.creates == []
    assert first.creates


def test_the_sweeps_kueue_queue_label_goes_to_every_trial() -> None:
    body_sweep = sweep()
    queued = type(body_sweep)(**{**body_sweep.__dict__, "labels": {c.LABEL_KUEUE_QUEUE: "team-a"}})
    manifest = plan(queued).creates[0]
    assert manifest["metadata"]["labels"][c.LABEL_KUEUE_QUEUE] == "team-a"


def test_a_trial_worse_than_the_median_at_the_same_epoch_is_pruned_and_suspended() -> None:
    manifests = plan(sweep(parallelism=4)).creates
    good = [finished(manifests[i], [0.8, 0.85, 0.9, 0.92]) for i in range(2)]
    bad = finished(manifests[2], [0.2, 0.25], phase="Running", total=4)
    fine = finished(manifests[3], [0.85, 0.9], phase="Running", total=4)
    result = plan(sweep(parallelism=4), [*good, bad, fine])
    assert [w.name for w in result.writes] == ["digits-trial-2"]
    write = result.writes[0]
    assert write.patch["spec"] == {"suspend": True}
    assert write.patch["metadata"]["annotations"][c.ANNOTATION_TRIAL_STOPPED].startswith("Pruned at epoch 2")
    assert [e.reason for e in write.events] == ["TrialPruned"]
    states = {t["name"]: t["state"] for t in result.status["trials"]}
    assert states["digits-trial-2"] == "Pruned" and states["digits-trial-3"] == "Running"
    assert result.judged == {"digits-trial-2": 2, "digits-trial-3": 2}
    # Judged already at this epoch: not asked again (the pruner's answer would be the same).
    assert plan(sweep(parallelism=4), [*good, bad, fine], judged=result.judged).writes == []


def test_a_trial_at_its_last_epoch_is_not_pruned() -> None:
    manifests = plan(sweep(parallelism=3)).creates
    good = [finished(manifests[i], [0.8, 0.9]) for i in range(2)]
    last = finished(manifests[2], [0.1, 0.1], phase="Running", total=2)
    assert plan(sweep(parallelism=3), [*good, last]).writes == []


def test_a_trial_that_never_reports_the_objective_fails_and_counts_against_max_failed_trials() -> None:
    manifests = plan(sweep(parallelism=3, maxFailedTrials=2)).creates
    silent = [finished(m, [0.9], metric="loss") for m in manifests]
    state, reason = trial_state(views(silent[:1])[0], "accuracy")
    assert state is TrialState.FAILED and "never reported accuracy" in reason and "loss" in reason
    result = plan(sweep(parallelism=3, maxFailedTrials=2), silent)
    assert result.status["phase"] == "Failed" and result.creates == []
    failed = next(cond for cond in result.status["conditions"] if cond["type"] == "Failed")
    assert failed["reason"] == "ObjectiveNotReported" and "accuracy" in failed["message"]
    assert "bestTrial" not in result.status
    assert {e.reason for e in result.events} >= {"TrialFailed", "ObjectiveNotReported"}


def test_reaching_the_goal_ends_the_sweep_and_stops_the_trials_still_running() -> None:
    spec = {"objective": {"metric": "accuracy", "direction": "maximize", "goal": 0.95}}
    manifests = plan(sweep(**spec)).creates
    winner = finished(manifests[0], [0.9, 0.96])
    still = finished(manifests[1], [0.5], phase="Running", total=6)
    result = plan(sweep(**spec), [winner, still])
    assert result.creates == []
    assert result.status["phase"] == "Succeeded"
    assert result.status["bestTrial"]["name"] == "digits-trial-0" and result.status["bestTrial"]["value"] == 0.96
    (stop,) = result.writes
    assert stop.name == "digits-trial-1" and stop.patch["spec"] == {"suspend": True}
    assert stop.patch["metadata"]["annotations"][c.ANNOTATION_TRIAL_STOPPED] == "Stopped: the sweep ended (GoalReached)"
    assert [e.reason for e in result.events] == ["TrialSucceeded", "GoalReached"]
    # Once written, the same plan tells nothing again.
    again = plan(with_status(sweep(**spec), result.status), [winner, still])
    assert again.events == []


def test_max_trials_finished_is_a_success_with_the_best_trial_and_its_parameters() -> None:
    manifests = plan(sweep(maxTrials=2)).creates
    done = [finished(manifests[0], [0.7]), finished(manifests[1], [0.9])]
    result = plan(sweep(maxTrials=2), done)
    assert result.status["phase"] == "Succeeded" and result.creates == []
    complete = next(cond for cond in result.status["conditions"] if cond["type"] == "Complete")
    assert complete["reason"] == "MaxTrialsReached"
    best = result.status["bestTrial"]
    assert best["name"] == "digits-trial-1"
    assert best["parameters"] == {k: manifests[1]["spec"]["hyperparameters"][k] for k in ("learningRate", "maxDepth")}
    assert result.status["trialsDone"] == 2 and result.status["trialsSucceeded"] == 2


def test_without_optuna_the_sweep_says_the_controller_is_unavailable() -> None:
    result = plan_sweep(sweep(), ObservedSweep(trials=[]), None, NOW)
    assert result.creates == [] and result.status["phase"] == "Pending"
    running = next(cond for cond in result.status["conditions"] if cond["type"] == "Running")
    assert running["reason"] == "SweepControllerUnavailable" and "sweeps" in running["message"]
    assert [e.reason for e in result.events] == ["SweepControllerUnavailable"]


def test_the_grid_sampler_visits_every_point_once() -> None:
    spec = {
        "parameters": [
            {"name": "maxDepth", "type": "int", "min": 2, "max": 4},
            {"name": "booster", "type": "categorical", "values": ["gbtree", "dart"]},
        ],
        "algorithm": {"name": "grid"},
        "maxTrials": 6,
        "parallelism": 1,
    }
    bodies: list = []
    for _ in range(6):
        (manifest,) = plan(sweep(**spec), bodies).creates
        bodies.append(finished(manifest, [0.5]))
    points = {(b["spec"]["hyperparameters"]["maxDepth"], b["spec"]["hyperparameters"]["booster"]) for b in bodies}
    assert points == {(d, b) for d in (2, 3, 4) for b in ("gbtree", "dart")}
    recorded = json.loads(bodies[0]["metadata"]["annotations"][c.ANNOTATION_SAMPLER_STATE])
    assert "grid_id" in recorded


def test_successive_halving_records_its_rungs_on_the_trial() -> None:
    spec = {"earlyStopping": {"pruner": "successiveHalving", "minEpochs": 1, "reductionFactor": 2}, "parallelism": 3}
    manifests = plan(sweep(**spec)).creates
    running = [finished(m, [0.5 + 0.1 * i], phase="Running", total=6) for i, m in enumerate(manifests)]
    result = plan(sweep(**spec), running)
    recorded = {
        w.name: json.loads(w.patch["metadata"]["annotations"][c.ANNOTATION_SAMPLER_STATE]) for w in result.writes
    }
    assert recorded and all("completed_rung_0" in attrs for attrs in recorded.values())


def test_cmaes_keeps_its_pickled_optimizer_out_of_the_trials_annotations() -> None:
    spec = {"algorithm": {"name": "cmaes", "seed": 3, "startupTrials": 0}, "parallelism": 1, "maxTrials": 20}
    bodies: list = []
    private: dict = {}
    for i in range(8):
        result = plan(sweep(**spec), bodies, private=private)
        private.update(result.private)
        (manifest,) = result.creates
        bodies.append(finished(manifest, [0.1 * (i % 5)]))
    annotations = [b["metadata"]["annotations"].get(c.ANNOTATION_SAMPLER_STATE, "") for b in bodies]
    assert all("cma:optimizer" not in text for text in annotations)
    assert any("cma:generation" in text for text in annotations)
    assert any(key.startswith("cma:optimizer") for attrs in private.values() for key in attrs), "kept in memory"


def test_a_deleted_trials_index_is_never_sampled_again_and_the_sweep_still_ends() -> None:
    """Trials 0-3 were created (status.trialsCreated 4); trial 3 (the newest) and trial 1 were deleted by hand."""
    first = plan(sweep(parallelism=4, maxTrials=5)).creates
    kept = [finished(first[0], [0.5, 0.6]), finished(first[2], [0.4, 0.7])]
    seen = with_status(sweep(parallelism=4, maxTrials=5), {"trialsCreated": 4})
    after = plan(seen, kept)
    assert [m["metadata"]["name"] for m in after.creates] == ["digits-trial-4"]
    assert after.status["trialsCreated"] == 4
    done = [*kept, finished(after.creates[0], [0.3, 0.5])]
    ended = plan(with_status(sweep(parallelism=4, maxTrials=5), {"trialsCreated": 5}), done)
    assert ended.creates == [] and ended.status["phase"] == "Succeeded", ended.status
    assert ended.status["bestTrial"]["name"] == "digits-trial-2"  # 0.7, the best of those left
