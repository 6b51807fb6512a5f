"""TrainingSweep against the real API server and operator, with trials on kwok (they run no code): what the API
server refuses, how trials are made, and a sweep whose trials never report the objective.

The sweeps whose trials really train (XGBoost on the local process nodes) are in test_sweeps.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.sweep_helpers import (
    create_sweep,
    events_of,
    refusal,
    sweep_manifest,
    trials,
    wait_sweep,
)
from tests.jobs import SIM
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

# kwok completes these workers after a second: a trial that succeeds without ever reporting progress.
KWOK_TEMPLATE: dict[str, Any] = {
    "framework": "xgboost",
    "image": "registry.example/train:1",
    "command": ["python", "train.py"],
    "numWorkers": 1,
    "gpusPerWorker": 0,
    "podAnnotations": {f"{SIM}/complete-after": "1s"},
    "hyperparameters": {"dataset": "digits"},
}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"parameters": []}, "spec.parameters"),
        ({"parameters": [{"name": "lr", "type": "float", "min": 0.5, "max": 0.1}]}, "min must not exceed max"),
        ({"parameters": [{"name": "lr", "type": "categorical", "min": 1}]}, "a categorical parameter takes values"),
        ({"parameters": [{"name": "lr", "type": "float", "min": 0, "max": 1, "log": True}]}, "log scale"),
        ({"parameters": [{"name": "d", "type": "int", "min": 1.5, "max": 4}]}, "whole numbers"),
        ({"algorithm": {"name": "grid"}}, "the grid algorithm needs a step"),
        ({"objective": {"metric": "not a name!"}}, "spec.objective.metric"),
        ({"trialTemplate": {"spec": {**KWOK_TEMPLATE, "framework": "caffe"}}}, "spec.trialTemplate.spec.framework"),
        ({"trialTemplate": {"spec": {**KWOK_TEMPLATE, "numWorkers": 0}}}, "spec.trialTemplate.spec.numWorkers"),
    ],
    ids=["empty", "min>max", "categorical", "log0", "int", "grid", "metric", "template", "workers"],
)
def test_the_api_server_refuses_a_sweep_that_cannot_run(
    kube: Kube, namespace: str, change: dict[str, Any], words: str
) -> None:
    manifest = sweep_manifest("bad", copy.deepcopy(KWOK_TEMPLATE), **change)
    assert words in refusal(kube, namespace, manifest)


def test_the_search_space_cannot_change_once_the_sweep_exists(kube: Kube, namespace: str) -> None:
    create_sweep(kube, namespace, sweep_manifest("fixed", copy.deepcopy(KWOK_TEMPLATE), maxTrials=1))
    patch = {"spec": {"parameters": [{"name": "maxDepth", "type": "int", "min": 1, "max": 3}]}}
    try:
        kube.custom.patch_namespaced_custom_object(k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, "fixed", patch)
    except Exception as error:
        assert "spec.parameters cannot change" in str(getattr(error, "body", error))
    else:
        raise AssertionError("the search space was changed")
    # spec.algorithm is optional and absent here: the immutability rules must still let the status be written
    # (a rule reading an absent field used to refuse every status write with "no such key").
    wait_sweep(kube, namespace, "fixed", lambda s: bool(s.get("phase")), "the sweep's status to be written")
    for changed in ({"algorithm": {"name": "random"}}, {"objective": {"metric": "loss"}}):
        try:
            kube.custom.patch_namespaced_custom_object(
                k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, "fixed", {"spec": changed}
            )
        except Exception as error:
            assert "cannot change" in str(getattr(error, "body", error)), error
        else:
            raise AssertionError(f"{changed} was changed")


def test_trials_that_never_report_the_objective_fail_the_sweep(kube: Kube, namespace: str) -> None:
    """kwok completes each trial's worker without a single progress report: no trial counts as good, the sweep
    ends Failed with reason ObjectiveNotReported, and the trials are TrainingJobs the sweep owns."""
    manifest = sweep_manifest(
        "silent",
        copy.deepcopy(KWOK_TEMPLATE),
        maxTrials=4,
        parallelism=2,
        maxFailedTrials=0,
        algorithm={"name": "random", "seed": 11},
    )
    created = create_sweep(kube, namespace, manifest)
    status = wait_sweep(kube, namespace, "silent", lambda s: s.get("phase") == "Failed", "the sweep to fail")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ObjectiveNotReported" and "never reported accuracy" in failed["message"]
    assert "bestTrial" not in status and status["trialsFailed"] >= 1 and status["trialsSucceeded"] == 0
    found = trials(kube, namespace, "silent")
    assert [t["metadata"]["name"] for t in found] == ["silent-trial-0", "silent-trial-1"], "no more after failing"
    for index, trial in enumerate(found):
        owner = trial["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (k.SWEEP_KIND, created["metadata"]["uid"], True)
        assert trial["metadata"]["labels"][k.LABEL_TRIAL_INDEX] == str(index)
        sampled = trial["spec"]["hyperparameters"]
        assert 0.01 <= sampled["learningRate"] <= 0.5 and 1 <= sampled["maxDepth"] <= 6
        assert sampled["dataset"] == "digits"
        assert status["trials"][index]["parameters"] == {n: sampled[n] for n in ("learningRate", "maxDepth")}
    # The Events are recorded after the status write that ends the sweep: wait for them, not for the status alone.
    reasons = wait_until(
        lambda: (lambda found: found if "ObjectiveNotReported" in found else None)(
            [reason for reason, _ in events_of(kube, namespace, "silent")]
        ),
        60,
        "the sweep's ObjectiveNotReported Event",
    )
    assert reasons.count("TrialCreated") == 2
