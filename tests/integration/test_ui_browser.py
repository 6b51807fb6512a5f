"""`tj ui` in headless Chromium against the real cluster and operator: the live job list (phase, progress, ETA
with no reload), a job page (curves recorded from status updates, conditions, workers, checkpoints, Events) and
the log view. kwok runs the pods, so worker 0 is played through the real progress endpoint, and kwok serves no
logs: the log view must show the API server's refusal; real logs need the local process node (see test below)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from playwright.sync_api import expect

from tests.integration.ui_support import UI_TIMEOUT_MS, RunningUi, Worker0, process_node_job, screenshot
from tests.jobs import create_job, job_manifest, wait_phase
from tests.kube import Kube

pytestmark = pytest.mark.integration


def chart_points(page: Any, testid: str) -> list[int]:
    """How many points each dataset of the Chart.js chart on canvas `testid` holds."""
    return page.evaluate(
        "(id) => window.Chart.getChart(document.querySelector(`[data-testid=${id}]`)).data.datasets"
        ".map((d) => d.data.length)",
        testid,
    )


def test_job_list_follows_phase_progress_and_eta_live(
    page: Any, admin_ui: RunningUi, kube: Kube, cluster: Any, namespace: str
) -> None:
    create_job(kube, namespace, job_manifest("live", workers=2, complete_after=None))
    row = page.locator(f'tr[data-job="{namespace}/live"]')
    expect(row.get_by_test_id("phase")).to_have_text("Running")
    expect(row.get_by_test_id("workers")).to_have_text("2/2")
    expect(row.get_by_test_id("percent")).to_have_count(0)  # nothing reported yet: no bar pretends

    worker = Worker0(cluster.kubeconfig, namespace, "live")
    try:
        worker.report(1, 4, loss=1.6, accuracy=0.41)
        expect(row.get_by_test_id("percent")).to_have_text("25%")
        expect(row.get_by_test_id("eta")).to_have_text("unknown")  # one report: no pace yet, and no guess
        # Status times have second precision: the pace needs the reports to be whole seconds apart.
        time.sleep(1.1)
        worker.report(2, 4, loss=0.9, accuracy=0.63)
        expect(row.get_by_test_id("percent")).to_have_text("50%")
        worker.report(3, 4, loss=0.7, accuracy=0.71)
        expect(row.get_by_test_id("percent")).to_have_text("75%")
        expect(row.get_by_test_id("eta")).to_have_text(re.compile(r"^\d+[smhd]"))
    finally:
        worker.close()
    screenshot(page, "ui-jobs")
    # All of it arrived over the event stream: the page was never reloaded.
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_job_page_shows_curves_conditions_workers_checkpoints_and_events(
    page: Any, admin_ui: RunningUi, kube: Kube, cluster: Any, namespace: str
) -> None:
    create_job(kube, namespace, job_manifest("curves", workers=2, complete_after=None, checkpoint={"keepLast": 2}))
    wait_phase(kube, namespace, "curves", "Running")
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/curves")
    summary = page.get_by_test_id("summary")
    expect(summary.get_by_test_id("phase")).to_have_text("Running")

    worker = Worker0(cluster.kubeconfig, namespace, "curves")
    try:
        for epoch, (loss, accuracy) in enumerate([(1.8, 0.3), (1.1, 0.55), (0.7, 0.71)], start=1):
            worker.report(epoch, 5, loss=loss, accuracy=accuracy)
            expect(summary.get_by_test_id("percent")).to_have_text(f"{epoch * 20}%")
    finally:
        worker.close()

    # One point per status update the UI saw, in both charts (progress over time; loss and accuracy per epoch).
    assert chart_points(page, "progress-chart") == [3]
    assert chart_points(page, "metrics-chart") == [3, 3]
    expect(page.get_by_test_id("conditions-table")).to_contain_text("Running")
    workers = page.get_by_test_id("workers-table")
    expect(workers).to_contain_text("curves-worker-0")
    expect(workers).to_contain_text("curves-worker-1")
    checkpoints = page.get_by_test_id("checkpoints-table")
    expect(checkpoints).to_contain_text("/checkpoints/ckpt-00000003")
    expect(checkpoints).to_contain_text("/checkpoints/ckpt-00000002")
    expect(checkpoints).not_to_contain_text("/checkpoints/ckpt-00000001")  # keepLast: 2, the training code pruned it
    expect(summary.get_by_test_id("simulated")).to_have_text("simulated")  # kwok plays its workers
    expect(page.get_by_test_id("events-table")).to_contain_text("WorkersCreated")
    expect(page.get_by_test_id("spec")).to_contain_text('"framework": "pytorch"')
    screenshot(page, "ui-job", full_page=True)

    # The curve survives a reload: the server sends the history it recorded.
    page.reload()
    expect(page.get_by_test_id("summary").get_by_test_id("percent")).to_have_text("60%")
    page.wait_for_function(
        "() => window.Chart?.getChart(document.querySelector('[data-testid=metrics-chart]'))"
        "?.data.datasets.length === 2"
    )
    assert chart_points(page, "metrics-chart") == [3, 3]


def test_log_view_shows_why_the_api_server_has_no_log(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    """kwok plays the kubelet and serves no logs: the view says so with the API server's own words."""
    create_job(kube, namespace, job_manifest("nolog", workers=1, complete_after=None))
    wait_phase(kube, namespace, "nolog", "Running")
    with pytest.raises(ApiException) as refused:
        # The request the UI makes (its parameters appear in the node URL the message names).
        kube.core.read_namespaced_pod_log(
            "nolog-worker-0", namespace, container="trainer", follow=True, tail_lines=2000, _preload_content=False
        )
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/nolog")
    expect(page.get_by_test_id("log-worker")).to_contain_text("nolog-worker-0")
    page.get_by_test_id("log-show").click()
    error = page.get_by_test_id("log-error")
    expect(error).to_contain_text("The API server could not return the log of nolog-worker-0")
    body = refused.value.body.decode() if isinstance(refused.value.body, bytes) else refused.value.body
    expect(error).to_contain_text(json.loads(body)["message"])


LOG_SCRIPT = "import time\nfor i in range(1, 11):\n    print(f'line-{i}', flush=True)\n    time.sleep(1)\n"


def test_log_view_streams_a_real_workers_log(page: Any, admin_ui: RunningUi, kube: Kube, namespace: str) -> None:
    """Live log streaming of a worker that really runs on a local process node: lines appear while the worker is
    still writing them. Runs once the cluster has process nodes (`tj cluster up --local-nodes`, issue 11)."""
    manifest = process_node_job(kube, "realog", LOG_SCRIPT)
    create_job(kube, namespace, manifest)
    wait_phase(kube, namespace, "realog", "Running", timeout=120)
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/realog")
    page.get_by_test_id("log-show").click()
    output = page.get_by_test_id("log-output")
    expect(output).to_contain_text("line-1")
    assert "line-10" not in output.inner_text()  # streamed while the worker still writes, not read at the end
    expect(output).to_contain_text("line-10", timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("log-state")).to_contain_text("end of the log of realog-worker-0")
