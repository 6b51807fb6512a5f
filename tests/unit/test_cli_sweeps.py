"""`tj sweep`: what it accepts as a sweep file and what it prints of one (pure, no server)."""

from __future__ import annotations

import datetime

import pytest

from trainingjob.cli.manifest import ManifestError
from trainingjob.cli.sweeps import describe_text, sweep_row, sweeps_from_yaml

NOW = datetime.datetime(2026, 11, 28, 12, 0, 10, tzinfo=datetime.UTC)
SWEEP = {
    "metadata": {"name": "digits-sweep", "creationTimestamp": "2026-11-28T12:00:00Z", "uid": "u"},
    "spec": {"maxTrials": 8, "objective": {"metric": "accuracy", "goal": 0.9}, "algorithm": {"name": "tpe"}},
    "status": {
        "phase": "Running",
        "trialsDone": 3,
        "trialsRunning": 2,
        "trialsPruned": 1,
        "bestTrial": {"name": "digits-sweep-trial-1", "value": 0.93, "parameters": {"maxDepth": 4}},
        "trials": [
            {
                "name": "digits-sweep-trial-0",
                "state": "Pruned",
                "epochs": 2,
                "value": 0.4,
                "parameters": {"c": "\x1b[2J"},
            },
            {"name": "digits-sweep-trial-1", "state": "Succeeded", "epochs": 6, "value": 0.93, "parameters": {}},
        ],
    },
}


def test_a_sweep_file_must_hold_named_trainingsweeps_only() -> None:
    assert sweeps_from_yaml("kind: TrainingSweep\nmetadata: {name: s}\n", "f.yaml")[0]["metadata"]["name"] == "s"
    for text, words in (
        ("kind: TrainingJob\nmetadata: {name: j}\n", "every document must be a TrainingSweep"),
        ("kind: TrainingSweep\nmetadata: {}\n", "needs metadata.name"),
        ("", "no TrainingSweep in it"),
        ("kind: [", "not valid YAML"),
    ):
        with pytest.raises(ManifestError, match=words):
            sweeps_from_yaml(text, "f.yaml")


def test_the_row_shows_the_counts_and_the_best_trial() -> None:
    assert sweep_row(SWEEP, NOW) == [
        "digits-sweep",
        "Running",
        "3",
        "2",
        "8",
        "accuracy",
        "0.93",
        SWEEP["status"]["bestTrial"]["name"],
        "10s",
    ]


def test_describe_lists_every_trial_and_no_control_character_reaches_the_terminal() -> None:
    text = describe_text(SWEEP, [], NOW)
    assert "goal 0.9" in text and "digits-sweep-trial-0" in text and "Pruned" in text
    assert "\x1b" not in text and "c=?[2J" in text
