"""trainingjob.sdk.parse_hyperparameters: the one reading of TRAININGJOB_HYPERPARAMETERS_FILE every example uses
(the examples' own cases are in test_examples_config.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainingjob import sdk

DEFAULTS = {"epochs": 3, "learningRate": 0.1, "amp": False, "device": "cpu"}


def test_values_take_the_type_of_their_default_and_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "hp.json"
    path.write_text(json.dumps({"epochs": 5.0, "learningRate": "0.5", "amp": "true", "other": 1}))
    params = sdk.parse_hyperparameters(path, DEFAULTS)
    assert params == {"epochs": 5, "learningRate": 0.5, "amp": True, "device": "cpu"}
    assert type(params["epochs"]) is int


def test_positive_keys_and_the_check_reject_what_cannot_work(tmp_path: Path) -> None:
    path = tmp_path / "hp.json"
    path.write_text(json.dumps({"epochs": 0}))
    with pytest.raises(sdk.ConfigError, match="epochs must be positive"):
        sdk.parse_hyperparameters(path, DEFAULTS, positive=("epochs",))

    def cpu_only(params: dict) -> None:
        if params["device"] != "cpu":
            raise sdk.ConfigError("cpu only")

    path.write_text(json.dumps({"device": "cuda"}))
    with pytest.raises(sdk.ConfigError, match="cpu only"):
        sdk.parse_hyperparameters(path, DEFAULTS, check=cpu_only)


def test_no_file_means_the_defaults_and_the_env_names_the_file() -> None:
    assert sdk.parse_hyperparameters(None, DEFAULTS) == DEFAULTS
    assert sdk.hyperparameters_file({"TRAININGJOB_HYPERPARAMETERS_FILE": "/etc/hp.json"}) == "/etc/hp.json"
    assert sdk.hyperparameters_file({}) is None


@pytest.mark.parametrize(
    "script",
    ["jax/train_jax.py", "pytorch/train_ddp.py", "tensorflow/train_multiworker.py", "xgboost/train_xgboost.py"],
)
def test_the_examples_use_the_sdk_instead_of_a_copy(script: str) -> None:
    text = (Path(__file__).parents[2] / "examples" / script).read_text()
    assert "sdk.parse_hyperparameters(" in text and "def _coerce" not in text
