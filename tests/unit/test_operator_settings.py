"""`tj operator`'s settings are written once (config.py, OperatorSettings and what it holds): its command line is
built from them, and the Deployment (deploy/manager/) and the Helm chart's values are checked against them."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml

from trainingjob.config import OperatorSettings, WebhookOptions

operator_cli = importlib.import_module("trainingjob.cli.operator")
REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = REPO / "deploy" / "manager" / "deployment.yaml"
VALUES = REPO / "charts" / "trainingjob-operator" / "values.yaml"


def parsed(args: list[str]) -> OperatorSettings:
    return operator_cli.settings_from(operator_cli.operator.make_context("operator", args).params)


def test_the_command_line_without_flags_gives_the_default_settings(monkeypatch: Any) -> None:
    """Each option's default is the field's own, shown as text where the field is not (durations, index lists) and
    read back to the same value."""
    for variable in ("POD_NAME", "POD_NAMESPACE", "TJ_MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(variable, raising=False)
    assert parsed([]) == OperatorSettings()


def test_every_setting_has_a_flag_of_its_own() -> None:
    flags = [flag for _, _, option in operator_cli.settings_options() for flag in option.flags]
    assert len(flags) == len(set(flags)), sorted(flag for flag in flags if flags.count(flag) > 1)
    assert all(flag.startswith("-") for flag in flags)


def operator_container() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_deployment_passes_flags_tj_operator_has_on_the_ports_the_container_declares() -> None:
    container = operator_container()
    assert container["args"][0] == "operator"
    settings = parsed(container["args"][1:])
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert settings.metrics_port == ports["metrics"] and settings.progress_port == ports["progress"]
    assert settings.webhooks.port == ports["webhook"]
    assert settings.liveness_endpoint == f"http://0.0.0.0:{ports['health']}/healthz"


def test_the_chart_values_are_the_deployments_ports_and_the_webhooks_default() -> None:
    values = yaml.safe_load(VALUES.read_text())
    ports = {port["name"]: port["containerPort"] for port in operator_container()["ports"]}
    assert values["ports"] == ports
    assert values["ports"]["webhook"] == WebhookOptions().port
