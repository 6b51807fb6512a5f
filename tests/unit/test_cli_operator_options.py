"""`tj operator` options that shape every job's pods and who may report progress."""

from __future__ import annotations

import importlib

import pytest
from click.testing import CliRunner

from trainingjob import options
from trainingjob.config import OperatorConfig, OperatorSettings

# The package exports the `operator` command under the module's name; the module itself is what we test.
operator_cli = importlib.import_module("trainingjob.cli.operator")


@pytest.mark.parametrize(
    ("text", "toleration"),
    [
        ("nvidia.com/gpu:NoSchedule", {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
        ("pool=a100:NoExecute", {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoExecute"}),
        ("pool=:PreferNoSchedule", {"key": "pool", "operator": "Equal", "value": "", "effect": "PreferNoSchedule"}),
    ],
)
def test_toleration_forms(text: str, toleration: dict) -> None:
    assert options.toleration(text) == toleration


@pytest.mark.parametrize("text", ["nvidia.com/gpu", "gpu:Sometimes", ":NoSchedule", "=x:NoSchedule"])
def test_malformed_tolerations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        options.toleration(text)


def test_tolerations_default_replace_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_with(monkeypatch).gpu_tolerations == OperatorConfig().gpu_tolerations
    assert run_with(monkeypatch, "--gpu-toleration", "none").gpu_tolerations == []
    assert len(options.tolerations(("a:NoSchedule", "b=c:NoExecute"))) == 2
    result = CliRunner().invoke(operator_cli.operator, ["--gpu-toleration", "gpu"])
    assert result.exit_code == 2 and "--gpu-toleration" in result.output


@pytest.mark.parametrize(("text", "indexes"), [("0", (0,)), ("1,0, 1", (0, 1)), ("3", (3,))])
def test_reporters(text: str, indexes: tuple[int, ...]) -> None:
    assert options.reporters(text) == indexes


@pytest.mark.parametrize("text", ["", "a", "-1", "0,x"])
def test_bad_reporters_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        options.reporters(text)


def settings_with(monkeypatch: pytest.MonkeyPatch, *args: str) -> OperatorSettings:
    """The settings `tj operator ARGS` would run with (the operator itself is not started)."""
    import trainingjob.operator.runner as runner

    seen: list[OperatorSettings] = []
    monkeypatch.setattr(runner, "run_operator", seen.append)
    result = CliRunner().invoke(operator_cli.operator, list(args))
    assert result.exit_code == 0, result.output
    return seen[0]


def run_with(monkeypatch: pytest.MonkeyPatch, *args: str) -> OperatorConfig:
    """The cluster configuration `tj operator ARGS` would run with."""
    return settings_with(monkeypatch, *args).resolved().config


def test_options_reach_the_operator_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    config = run_with(monkeypatch, "--gpu-toleration", "pool=a100:NoSchedule", "--progress-reporters", "0,1")
    assert config.gpu_tolerations == [{"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}]
    assert config.progress_reporters == (0, 1)
    defaults = run_with(monkeypatch)
    assert defaults.gpu_tolerations == OperatorConfig().gpu_tolerations and defaults.progress_reporters == (0,)


def test_a_liveness_bound_below_5_seconds_is_refused_and_5_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watches resume within half the bound (process.watch_timeout): a 1 s bound let a quiet, healthy operator's
    watches stay silent as long as the bound itself, and /healthz flapped."""
    result = CliRunner().invoke(operator_cli.operator, ["--reconcile-stuck-after", "4"])
    assert result.exit_code == 2 and "--reconcile-stuck-after" in result.output
    assert run_with(monkeypatch, "--reconcile-stuck-after", "5").stuck_reconcile_seconds == 5
