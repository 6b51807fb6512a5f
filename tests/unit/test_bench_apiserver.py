"""The benchmark's readings of the API server: its /metrics samples (pod watches, conversion webhook calls,
labelled sums) and its log's forced watch closes (moved out of test_bench.py, which had grown past 400 lines)."""

from __future__ import annotations

from bench.measure import (
    conversion_figures,
    forced_watch_closes,
    forced_watch_closes_by_watch,
    metric_sum,
    pod_watch_figures,
)


def test_metric_sum_filters_by_labels() -> None:
    text = (
        '# HELP x\ncontroller_runtime_reconcile_total{controller="pytorchjob-controller",result="success"} 7\n'
        'controller_runtime_reconcile_total{controller="pytorchjob-controller",result="error"} 1\n'
        'controller_runtime_reconcile_total{controller="other",result="success"} 100\n'
        "trainingjob_workqueue_depth 0.0\n"
    )
    assert metric_sum(text, "controller_runtime_reconcile_total", 'controller="pytorchjob-controller"') == 8
    assert metric_sum(text, "trainingjob_workqueue_depth") == 0
    assert metric_sum(text, "absent_metric") is None


def test_forced_watch_closes_are_counted_from_the_api_server_log(tmp_path) -> None:
    log = tmp_path / "kube-apiserver.log"
    assert forced_watch_closes(log) is None, "no log: not counted, not zero"
    close = 'I1126 cache_watcher.go:203] Forcing pods watcher close due to unresponsiveness: key: "/pods/"\n'
    log.write_text(close + "I1126 something else\n" + close)
    assert forced_watch_closes(log) == 2


def test_forced_watch_closes_are_told_apart_by_whose_watch_it_was(tmp_path) -> None:
    """The selector says whose watch fell behind: kwok's (spec.nodeName!=), an operator's (its label), …"""
    log = tmp_path / "kube-apiserver.log"
    line = 'I1127 cache_watcher.go:203] Forcing pods watcher close due to unresponsiveness: key: "{}", labels: "{}", '
    log.write_text(
        (line + 'fields: "{}". len(c.input) = 10, len(c.result) = 10, graceful = false\n').format(
            "/pods/", "", "spec.nodeName!="
        )
        + (line + 'fields: "". len(c.input) = 10\n').format("/pods/", "app=x", "")
        + (line + 'fields: "spec.nodeName!=". len(c.input) = 10\n').format("/pods/", "", "")
    )
    assert forced_watch_closes_by_watch(log) == {
        "pods /pods/ labels=- fields=spec.nodeName!=": 2,
        "pods /pods/ labels=app=x fields=-": 1,
    }
    assert forced_watch_closes_by_watch(tmp_path / "missing.log") == {}


def test_pod_watch_figures_come_from_the_pods_samples_only() -> None:
    text = (
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 27005\n'
        'apiserver_watch_events_total{group="ml.example.com",resource="trainingjobs",version="v1"} 1169\n'
        'apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 1.67737678e+08\n'
        'apiserver_watch_cache_events_received_total{group="",resource="pods"} 3478\n'
        'apiserver_terminated_watchers_total{group="",resource="pods"} 86\n'
    )
    assert pod_watch_figures(text) == {
        "pod_watch_events_sent": 27005,
        "pod_watch_bytes_sent": 167737678,
        "pod_events_received": 3478,
        "pod_watchers_terminated": 86,
        "pod_watch_bytes_per_event": 6211,
    }
    assert pod_watch_figures("")["pod_watch_bytes_per_event"] is None


def test_conversion_figures_sum_every_conversion_the_api_server_made() -> None:
    labels = 'crd_name="trainingjobs.ml.example.com",from_version="{}",succeeded="true",to_version="{}"'
    text = (
        f"apiserver_crd_conversion_webhook_duration_seconds_count{{{labels.format('v1', 'v1alpha1')}}} 1700\n"
        f"apiserver_crd_conversion_webhook_duration_seconds_count{{{labels.format('v1alpha1', 'v1')}}} 100\n"
        f"apiserver_crd_conversion_webhook_duration_seconds_sum{{{labels.format('v1', 'v1alpha1')}}} 12.345\n"
        f"apiserver_crd_conversion_webhook_duration_seconds_sum{{{labels.format('v1alpha1', 'v1')}}} 1.0\n"
        'apiserver_watch_events_total{group="",resource="pods",version="v1"} 27005\n'
    )
    assert conversion_figures(text) == {"conversion_calls": 1800, "conversion_wait_seconds": 13.3}
    assert conversion_figures("") == {"conversion_calls": None, "conversion_wait_seconds": None}
