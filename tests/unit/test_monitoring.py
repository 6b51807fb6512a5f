"""deploy/monitoring/: the dashboard and the alerts name only metrics the operator exports, and are well formed.

These need nothing but Python; test_monitoring_tools.py runs promtool and kubectl on the same files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from trainingjob.operator.gpu_telemetry import ExporterSlices, GpuTelemetry
from trainingjob.operator.metrics import CacheCollector, OperatorMetrics
from trainingjob.reconcile.observed import PodView

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
SERVICE_MONITOR_FILE = MONITORING.parent / "overlays" / "monitoring" / "service-monitor.yaml"
# Labels the Prometheus Operator puts on every target of a ServiceMonitor (plus Prometheus's own job and instance).
TARGET_LABELS = {"job", "instance", "namespace", "service", "pod", "container", "endpoint"}
RULE_FILE = MONITORING / "prometheus-rule.yaml"
DASHBOARD_FILE = MONITORING / "grafana-dashboard.json"
KUSTOMIZATION_FILE = MONITORING / "kustomization.yaml"

# The series a family of each type exposes (prometheus_client: counters `_total`, every counter and histogram a
# `_created` timestamp). A bare counter or histogram family name is not a series.
SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}
ALLOWED_FOREIGN_METRICS = {"up"}
METRIC_NAME = re.compile(r"(?<![A-Za-z0-9_:])trainingjob_[A-Za-z0-9_:]*")
STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
REQUIRED_ALERTS = {
    "TrainingJobFailed",
    "TrainingJobStuckPending",
    "TrainingJobRestartRateHigh",
    "TrainingJobGPUsIdle",
    "TrainingJobOperatorDown",
    "TrainingJobOperatorNoLeader",
    "TrainingJobReconcileErrors",
    "TrainingJobConversionFailing",
}
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


# --- what the operator exports -------------------------------------------------------------------------------------


def operator_metrics() -> OperatorMetrics:
    """The operator's registry with a fake job and pod in the cache, so every gauge family has a sample."""
    metrics = OperatorMetrics()
    job = {
        "metadata": {"namespace": "ml", "name": "bert", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"framework": "pytorch", "gpuPerWorker": 2},
        "status": {
            "phase": "Running",
            "progress": {"percent": 42.0, "epoch": 4, "metrics": {"loss": 0.25, "accuracy": 0.9}},
        },
    }
    metrics.register_cache(CacheCollector(lambda: [job], lambda: [("ml", "bert", "Running")], lambda: True, lambda: 3))
    worker = PodView(name="bert-worker-0", index=0, attempt=0, spec_hash="", phase="Running")
    telemetry = GpuTelemetry(ExporterSlices(), lambda: [(("ml", "bert"), worker)], lambda key: None, 30)
    telemetry.update(['DCGM_FI_DEV_GPU_UTIL{gpu="0",namespace="ml",pod="bert-worker-0"} 87'])
    metrics.register_cache(telemetry.collector())
    return metrics


def operator_families() -> dict[str, tuple[str, set[str]]]:
    """Family name -> (type, names of the samples it exposes)."""
    return {f.name: (f.type, {s.name for s in f.samples}) for f in operator_metrics().registry.collect()}


def exported_label_names() -> set[str]:
    return {label for f in operator_metrics().registry.collect() for s in f.samples for label in s.labels}


def exported_series_names() -> set[str]:
    names: set[str] = set()
    for family, (kind, samples) in operator_families().items():
        names |= {family + suffix for suffix in SERIES_SUFFIXES[kind]}
        names |= samples
    return names


def test_the_fake_cache_makes_every_gauge_family_expose_a_sample() -> None:
    families = operator_families()
    gauges = {name for name, (kind, _) in families.items() if kind == "gauge"}
    assert gauges == {
        "trainingjob_jobs",
        "trainingjob_workers",
        "trainingjob_gpus_requested",
        "trainingjob_job_progress_percent",
        "trainingjob_progress_percent",
        "trainingjob_current_epoch",
        "trainingjob_loss",
        "trainingjob_accuracy",
        "trainingjob_operator_leader",
        "trainingjob_workqueue_depth",
        "trainingjob_gpu_utilization_percent",
    }
    assert all(families[name][1] == {name} for name in gauges)


def test_suffix_table_matches_what_prometheus_client_exposes() -> None:
    for family, (kind, samples) in operator_families().items():
        assert samples <= {family + suffix for suffix in SERIES_SUFFIXES[kind]}, family


# --- the expressions in deploy/monitoring/ ---------------------------------------------------------------------------


def load_rule() -> dict[str, Any]:
    return yaml.safe_load(RULE_FILE.read_text())


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD_FILE.read_text())


def rules() -> Iterator[dict[str, Any]]:
    for group in load_rule()["spec"]["groups"]:
        yield from group["rules"]


def dashboard_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that shows data (rows, collapsed or not, only hold panels)."""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_expressions() -> Iterator[tuple[str, str]]:
    dashboard = load_dashboard()
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target.get('refId')}", target.get("expr", "")
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if variable.get("type") == "query":
            yield f"variable {variable['name']}", query["query"] if isinstance(query, dict) else query


def all_expressions() -> list[tuple[str, str]]:
    return [(f"rule {r.get('alert') or r.get('record')}", r["expr"]) for r in rules()] + list(dashboard_expressions())


def metric_names(expr: str) -> set[str]:
    """trainingjob_* identifiers outside string literals (label values such as job="trainingjob-operator")."""
    return set(METRIC_NAME.findall(STRING_LITERAL.sub('""', expr)))


def test_metric_name_extraction() -> None:
    expr = 'sum by (le) (rate(trainingjob_x_bucket{job="trainingjob_not_a_metric"}[5m])) / on() trainingjob_y'
    assert metric_names(expr) == {"trainingjob_x_bucket", "trainingjob_y"}


def test_every_metric_in_the_dashboard_and_rules_is_exported_by_the_operator() -> None:
    allowed = exported_series_names() | ALLOWED_FOREIGN_METRICS
    unknown = {where: sorted(metric_names(expr) - allowed) for where, expr in all_expressions()}
    assert {where: names for where, names in unknown.items() if names} == {}


def test_every_expression_names_a_metric() -> None:
    for where, expr in all_expressions():
        assert metric_names(expr) or re.search(r"\bup\{", expr), where


def test_the_dashboard_shows_every_metric_family() -> None:
    used = set().union(*(metric_names(expr) for _, expr in dashboard_expressions()))
    for family, (kind, _) in operator_families().items():
        assert any(family + suffix in used for suffix in SERIES_SUFFIXES[kind]), family


def test_quantiles_come_from_bucket_rates_aggregated_by_le() -> None:
    quantiles = [(where, expr) for where, expr in all_expressions() if "histogram_quantile" in expr]
    assert len(quantiles) >= 7  # time to Running x3, job duration x2, reconcile x2
    for where, expr in quantiles:
        # `le` kept (other labels may be kept beside it, one quantile per series: the webhooks' answer time)
        assert re.search(r"sum by \((\w+, )*le\) \(rate\(trainingjob_\w+_bucket", expr), where


# --- the PrometheusRule ----------------------------------------------------------------------------------------------


def test_rule_has_the_prometheus_rule_shape() -> None:
    rule = load_rule()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["kind"] == "PrometheusRule"
    assert rule["metadata"]["name"] == "trainingjob-operator"
    assert rule["metadata"]["namespace"] == "trainingjob-system"
    groups = rule["spec"]["groups"]
    assert groups and len({g["name"] for g in groups}) == len(groups)
    for group in groups:
        assert set(group) <= {"name", "interval", "rules", "limit", "partial_response_strategy"}
        assert group["rules"], group["name"]


def test_every_alert_has_severity_summary_description_and_for() -> None:
    alerts = [r for r in rules() if "alert" in r]
    names = [a["alert"] for a in alerts]
    assert len(set(names)) == len(names)
    assert set(names) >= REQUIRED_ALERTS
    for alert in alerts:
        name = alert["alert"]
        assert set(alert) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, name
        assert isinstance(alert["expr"], str) and alert["expr"].strip(), name
        assert DURATION.match(str(alert["for"])), name
        assert alert["labels"]["severity"] in ("info", "warning", "critical"), name
        assert alert["annotations"]["summary"].strip(), name
        assert alert["annotations"]["description"].strip(), name


def test_gauge_alerts_count_the_leader_only() -> None:
    """Both replicas serve the cache gauges: an alert summing them without the leader filter counts jobs twice."""
    for where, expr in all_expressions():
        if metric_names(expr) & {"trainingjob_jobs", "trainingjob_workers", "trainingjob_gpus_requested"}:
            assert "and on (instance) (trainingjob_operator_leader == 1)" in expr, where


def test_the_service_monitor_keeps_the_metrics_own_namespace_and_job_labels() -> None:
    """Without honorLabels the target's `namespace` (trainingjob-system) and `job` replace the metrics' own, which
    Prometheus renames exported_*: the $namespace filter, the per-namespace alerts and the progress legend break."""
    colliding = exported_label_names() & TARGET_LABELS
    assert colliding == {"namespace", "job"}
    monitor = yaml.safe_load(SERVICE_MONITOR_FILE.read_text())
    assert monitor["kind"] == "ServiceMonitor"
    assert [endpoint.get("honorLabels") for endpoint in monitor["spec"]["endpoints"]] == [True]
    assert not any(
        relabel.get("action") in ("labeldrop", "labelmap") or set(relabel.get("sourceLabels", ())) & colliding
        for endpoint in monitor["spec"]["endpoints"]
        for relabel in endpoint.get("metricRelabelings", [])
    )


def test_nothing_reads_labels_renamed_by_a_scrape_without_honor_labels() -> None:
    texts = {"dashboard": DASHBOARD_FILE.read_text(), "rules": RULE_FILE.read_text()}
    for where, text in texts.items():
        assert "exported_" not in text, where
    progress = [p for p in dashboard_panels(load_dashboard()) if "trainingjob_job_progress_percent" in json.dumps(p)]
    assert [t["legendFormat"] for p in progress for t in p["targets"]] == ["{{namespace}}/{{job}}"]


# --- the dashboard ---------------------------------------------------------------------------------------------------


def test_dashboard_variables() -> None:
    dashboard = load_dashboard()
    assert dashboard["schemaVersion"] >= 38
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "framework"):
        variable = variables[name]
        assert variable["type"] == "query"
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        assert re.fullmatch(rf"label_values\(trainingjob_\w+, {name}\)", query), name


def test_every_panel_has_a_datasource_and_a_target_with_an_expression() -> None:
    dashboard = load_dashboard()
    panels = list(dashboard_panels(dashboard))
    assert len(panels) >= 12
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    for panel in panels:
        title = panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, title
        assert panel["targets"], title
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), title
        for target in panel["targets"]:
            assert target["expr"].strip(), title
            assert target.get("datasource", panel["datasource"]) == panel["datasource"], title


def test_panels_fit_the_grid_without_overlapping() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in load_dashboard()["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


# --- the kustomization -----------------------------------------------------------------------------------------------


def test_kustomization_lists_the_rule_and_generates_the_dashboard_config_map() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION_FILE.read_text())
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == ["prometheus-rule.yaml"]
    (generator,) = kustomization["configMapGenerator"]
    assert generator["name"] == "trainingjob-grafana-dashboard"
    assert generator["namespace"] == "trainingjob-system"
    assert generator["options"]["disableNameSuffixHash"] is True
    assert generator["options"]["labels"]["grafana_dashboard"] == "1"  # a string: label values are strings
    sources = [entry.split("=", 1)[-1] for entry in generator["files"]]
    assert sources == ["grafana-dashboard.json"]
    listed = {"kustomization.yaml", *kustomization["resources"], *sources}
    assert {p.name for p in MONITORING.iterdir()} == listed
