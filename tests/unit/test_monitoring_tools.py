"""deploy/monitoring/ checked by the real tools (`make tools` builds them; `make test` does first).

promtool (tools/prometheus, `PROMETHEUS` in trainingjob.cluster.build) parses every expression and runs unit tests of
the alerts on synthetic series; the cluster's kubectl renders the kustomization. The Python-only checks of the same
files are in test_monitoring.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.prerequisites import missing_prerequisite
from tests.unit.test_monitoring import MONITORING, dashboard_expressions, load_dashboard, load_rule, rules
from trainingjob.cluster.build import COMPONENT_SETS, PROMETHEUS, binary_path, is_built
from trainingjob.cluster.paths import binaries_dir

# --- with built tools (integration) ---------------------------------------------------------------------------------

PROMTOOL_HINT = (
    "promtool is not built; build it once (about 6 minutes from a cold Go cache) with: tj cluster build --with-promtool"
)
GRAFANA_VARIABLES = {"__rate_interval": "5m", "namespace": ".*", "framework": ".*"}


@pytest.fixture
def promtool() -> Path:
    if not is_built(PROMETHEUS):
        missing_prerequisite(PROMTOOL_HINT)
    return binaries_dir(PROMETHEUS.name, PROMETHEUS.version) / "promtool"


def run(command: list[str | Path], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def write_rule_file(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


@pytest.mark.integration
def test_promtool_accepts_the_rules(promtool: Path, tmp_path: Path) -> None:
    rule_file = write_rule_file(tmp_path / "rules.yaml", load_rule()["spec"]["groups"])
    result = run([promtool, "check", "rules", rule_file])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(list(rules()))} rules found" in result.stdout
    # The check is not vacuous: the same promtool rejects a broken expression.
    broken_group = {"name": "x", "rules": [{"record": "x", "expr": "sum by (le"}]}
    broken = write_rule_file(tmp_path / "broken.yaml", [broken_group])
    assert run([promtool, "check", "rules", broken]).returncode != 0


def substitute_grafana_variables(expr: str) -> str:
    def value(match: re.Match[str]) -> str:
        return GRAFANA_VARIABLES[match.group(1) or match.group(2)]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


@pytest.mark.integration
def test_promtool_parses_every_dashboard_expression(promtool: Path, tmp_path: Path) -> None:
    """Each panel query becomes a recording rule (Grafana's variables replaced by sample values) for promtool."""
    records = [
        {"record": f"dashboard:expr_{i}", "expr": substitute_grafana_variables(expr)}
        for i, (where, expr) in enumerate(dashboard_expressions())
        if where.startswith("panel")
    ]
    rule_file = write_rule_file(tmp_path / "dashboard.yaml", [{"name": "dashboard", "rules": records}])
    result = run([promtool, "check", "rules", rule_file])
    assert result.returncode == 0, result.stdout + result.stderr


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    label_text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{label_text}}}", "values": values}


OPERATOR = {"job": "trainingjob-operator"}
LEADER_A = series("trainingjob_operator_leader", "1+0x40", instance="a", **OPERATOR)
STANDBY_B = series("trainingjob_operator_leader", "0+0x40", instance="b", **OPERATOR)
UP = [series("up", "1+0x40", instance=i, **OPERATOR) for i in "ab"]
FAILED = {"namespace": "ml", "framework": "pytorch", "reason": "BackoffLimitExceeded", "instance": "a", **OPERATOR}
FAILED_ALERT = {"severity": "warning", "namespace": "ml", "framework": "pytorch", "reason": "BackoffLimitExceeded"}


def gpu_series(job: str, worker: str, values: str, instance: str = "a") -> dict[str, str]:
    labels = {"namespace": "ml", "trainingjob": job, "worker": worker, "instance": instance, **OPERATOR}
    return series("trainingjob_gpu_utilization_percent", values, **labels)


def alert_test(at: str, name: str, *firing: dict[str, str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in firing]}


ALERT_SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "a label set's first failure (the series appears at 1) fires for 10 minutes",
        "input_series": [LEADER_A, series("trainingjob_jobs_failed_total", "_x20 1+0x20", **FAILED)],
        "alert_rule_test": [
            alert_test("19m", "TrainingJobFailed"),
            alert_test("22m", "TrainingJobFailed", FAILED_ALERT),
            alert_test("29m", "TrainingJobFailed", FAILED_ALERT),
            alert_test("35m", "TrainingJobFailed"),
        ],
    },
    {
        "name": "a further failure fires through increase()",
        "input_series": [LEADER_A, series("trainingjob_jobs_failed_total", "1+0x19 2+0x20", **FAILED)],
        "alert_rule_test": [
            alert_test("15m", "TrainingJobFailed"),
            alert_test("22m", "TrainingJobFailed", FAILED_ALERT),
        ],
    },
    {
        "name": "old failures do not fire again after Prometheus (re)starts",
        "input_series": [LEADER_A, series("trainingjob_jobs_failed_total", "3+0x40", **FAILED)],
        "alert_rule_test": [alert_test("5m", "TrainingJobFailed"), alert_test("15m", "TrainingJobFailed")],
    },
    {
        "name": "Pending counts on the leader only, for 15 minutes",
        "input_series": [
            LEADER_A,
            STANDBY_B,
            series("trainingjob_jobs", "1+0x40", phase="Pending", instance="a", **OPERATOR),
            series("trainingjob_jobs", "1+0x40", phase="Pending", instance="b", **OPERATOR),
        ],
        "alert_rule_test": [
            alert_test("10m", "TrainingJobStuckPending"),
            alert_test("20m", "TrainingJobStuckPending", {"severity": "warning"}),
        ],
    },
    {
        "name": "a standby's stale Pending count does not fire",
        "input_series": [
            LEADER_A,
            STANDBY_B,
            series("trainingjob_jobs", "0+0x40", phase="Pending", instance="a", **OPERATOR),
            series("trainingjob_jobs", "1+0x40", phase="Pending", instance="b", **OPERATOR),
        ],
        "alert_rule_test": [alert_test("20m", "TrainingJobStuckPending")],
    },
    {
        "name": "restarts: above 3 per 15 minutes per namespace and framework, summed over reasons",
        "input_series": [
            series("trainingjob_jobs_restarted_total", "0+1x40", namespace="a", framework="jax", reason="X"),
            series("trainingjob_jobs_restarted_total", "0+0.1x40", namespace="b", framework="jax", reason="X"),
            series("trainingjob_jobs_restarted_total", "0+0.15x40", namespace="c", framework="mpi", reason="X"),
            series("trainingjob_jobs_restarted_total", "0+0.15x40", namespace="c", framework="mpi", reason="Y"),
        ],
        "alert_rule_test": [
            alert_test(
                "20m",
                "TrainingJobRestartRateHigh",
                {"severity": "warning", "namespace": "a", "framework": "jax"},
                {"severity": "warning", "namespace": "c", "framework": "mpi"},
            )
        ],
    },
    {
        "name": "GPUs idle for 30 minutes, per job: every worker below 5 %; the leader's series only",
        "input_series": [
            LEADER_A,
            STANDBY_B,
            gpu_series("idle", "0", "1+0x50"),
            gpu_series("idle", "1", "3+0x50"),
            gpu_series("half", "0", "0+0x50"),
            gpu_series("half", "1", "90+0x50"),
            gpu_series("busy", "0", "0+0x50", instance="b"),  # a standby's series: not counted
        ],
        "alert_rule_test": [
            alert_test("20m", "TrainingJobGPUsIdle"),
            alert_test("40m", "TrainingJobGPUsIdle", {"severity": "warning", "namespace": "ml", "trainingjob": "idle"}),
        ],
    },
    {
        "name": "no replica up: one alert, not one per absent() term",
        "input_series": [series("up", "0+0x40", instance="a", **OPERATOR)],
        "alert_rule_test": [
            alert_test("3m", "TrainingJobOperatorDown"),
            alert_test("10m", "TrainingJobOperatorDown", {"severity": "critical"}),
        ],
    },
    {
        "name": "a healthy pair: one leader, one standby",
        "input_series": [*UP, LEADER_A, STANDBY_B],
        "alert_rule_test": [
            alert_test("10m", "TrainingJobOperatorDown"),
            alert_test("10m", "TrainingJobOperatorNoLeader"),
        ],
    },
    {
        "name": "replicas up but nobody leads",
        "input_series": [*UP, series("trainingjob_operator_leader", "0+0x40", instance="a", **OPERATOR), STANDBY_B],
        "alert_rule_test": [
            alert_test("3m", "TrainingJobOperatorNoLeader"),
            alert_test("10m", "TrainingJobOperatorNoLeader", {"severity": "critical"}),
            alert_test("10m", "TrainingJobOperatorDown"),
        ],
    },
    {
        "name": "reconcile errors that keep coming for 10 minutes, per kind",
        "input_series": [
            series("trainingjob_reconcile_errors_total", "0+1x40", kind="ApiException"),
            series("trainingjob_reconcile_errors_total", "5+0x40", kind="TimeoutError"),
        ],
        "alert_rule_test": [
            alert_test("8m", "TrainingJobReconcileErrors"),
            alert_test("20m", "TrainingJobReconcileErrors", {"severity": "warning", "kind": "ApiException"}),
        ],
    },
    {
        "name": "conversions that keep failing for 5 minutes fire, by outcome; successful ones never",
        "input_series": [
            series("trainingjob_webhook_requests_total", "0+50x40", webhook="convert", outcome="converted"),
            series("trainingjob_webhook_requests_total", "0+0x10 1+1x30", webhook="convert", outcome="failed"),
            series("trainingjob_webhook_requests_total", "0+5x40", webhook="validate", outcome="denied"),
        ],
        "alert_rule_test": [
            alert_test("9m", "TrainingJobConversionFailing"),
            alert_test("20m", "TrainingJobConversionFailing", {"severity": "critical", "outcome": "failed"}),
        ],
    },
]


@pytest.mark.integration
def test_promtool_unit_tests_of_the_alerts(promtool: Path, tmp_path: Path) -> None:
    """The alerts' logic on synthetic series (annotations left out: these tests are about the expressions)."""
    groups = load_rule()["spec"]["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        rule.pop("annotations", None)
    write_rule_file(tmp_path / "rules.yaml", groups)
    tests = [{"interval": "1m", **scenario} for scenario in ALERT_SCENARIOS]
    test_file = tmp_path / "alerts_test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}))
    result = run([promtool, "test", "rules", test_file.name], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
def test_kubectl_kustomize_renders_the_rule_and_the_dashboard_config_map() -> None:
    kubernetes = next(s for s in COMPONENT_SETS if s.name == "kubernetes")
    if not is_built(kubernetes):
        missing_prerequisite("kubectl is not built (make components)")
    result = run([binary_path("kubectl"), "kustomize", MONITORING])
    assert result.returncode == 0, result.stderr
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(result.stdout)}
    assert set(objects) == {("PrometheusRule", "trainingjob-operator"), ("ConfigMap", "trainingjob-grafana-dashboard")}
    config_map = objects["ConfigMap", "trainingjob-grafana-dashboard"]
    assert config_map["metadata"]["namespace"] == "trainingjob-system"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["trainingjob-operator.json"]) == load_dashboard()
    assert objects["PrometheusRule", "trainingjob-operator"] == load_rule()
