"""The UI's sweep pages in headless Chromium against the real cluster and operator: a TrainingSweep whose two trials
run on kwok and report their objective through the real progress endpoint (worker 0 played, as in
test_ui_browser.py), listed with its best trial, its trials table (state, objective, parameters) linking to the
trials' job pages, and a categorical value that is markup shown as text, never run."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.gang_support import finish
from tests.integration.sweep_helpers import create_sweep, sweep_manifest, wait_sweep
from tests.integration.test_sweep_api import KWOK_TEMPLATE
from tests.integration.test_ui_attacks import PAYLOAD, assert_nothing_ran, hostile_page  # noqa: F401 (a fixture)
from tests.integration.ui_support import UI_TIMEOUT_MS, RunningUi, Worker0, screenshot
from tests.jobs import SIM, wait_phase
from tests.kube import Kube

pytestmark = pytest.mark.integration
MARKUP = '<img src=x onerror="window.__xss=1">'


def test_the_sweep_pages_list_sweeps_and_show_trials_best_trial_and_links_with_values_as_text(
    page: Any, admin_ui: RunningUi, kube: Kube, cluster: Any, namespace: str
) -> None:
    template = copy.deepcopy(KWOK_TEMPLATE)
    del template["podAnnotations"]  # kwok runs the workers until told to finish (gang_support.finish)
    manifest = sweep_manifest("look", template, maxTrials=2, parallelism=2, algorithm={"name": "random", "seed": 3})
    manifest["spec"]["parameters"].append({"name": "booster", "type": "categorical", "values": [MARKUP]})
    manifest["spec"]["earlyStopping"] = {"pruner": "none"}
    create_sweep(kube, namespace, manifest)
    for trial, accuracy in (("look-trial-0", 0.61), ("look-trial-1", 0.92)):
        wait_phase(kube, namespace, trial, "Running")
        worker = Worker0(cluster.kubeconfig, namespace, trial)
        try:
            worker.report(1, 1, accuracy=accuracy)
        finally:
            worker.close()
        finish(kube, namespace, trial)
    wait_sweep(kube, namespace, "look", lambda s: s.get("phase") == "Succeeded", "the sweep to succeed")

    page.get_by_test_id("nav-sweeps").click()
    row = page.locator(f'tr[data-sweep="{namespace}/look"]')
    expect(row.get_by_test_id("phase")).to_have_text("Succeeded", timeout=UI_TIMEOUT_MS)
    expect(row.get_by_test_id("sweep-best")).to_have_text("0.92 (look-trial-1)")
    row.get_by_role("link", name="look").click()

    trials = page.get_by_test_id("trials-table")
    expect(trials.locator("tbody tr")).to_have_count(2, timeout=UI_TIMEOUT_MS)
    first = trials.locator('tr[data-trial="look-trial-0"]')
    expect(first.get_by_test_id("trial-state")).to_have_text("Succeeded")
    expect(first.get_by_test_id("trial-value")).to_have_text("0.61")
    expect(first.get_by_test_id("trial-parameters")).to_contain_text(f"booster={MARKUP}")  # as text
    best = page.get_by_test_id("best-trial")
    expect(best).to_contain_text(f"look-trial-1 = 0.92 with booster={MARKUP}  learningRate=")
    assert page.locator("main img").count() == 0 and page.evaluate("window.__xss") is None
    screenshot(page, "ui-sweep")

    best.get_by_role("link", name="look-trial-1").click()
    expect(page.get_by_test_id("summary").get_by_test_id("phase")).to_have_text("Succeeded")
    assert page.url.endswith(f"#/jobs/{namespace}/look-trial-1")


def test_a_hostile_trial_failure_is_shown_as_text_on_the_sweep_page(
    hostile_page: tuple[Any, list[str]],  # noqa: F811 (the fixture imported above)
    admin_ui: RunningUi,
    kube: Kube,
    namespace: str,
) -> None:
    """Markup in a worker's termination reason (what a container, or whoever writes pods/status, reports) reaches
    the trial's failure, the trials table's Reason and the sweep's Failed condition: shown as text, never run
    (issue 41; test_ui_attacks.py plants the same payload on the job pages)."""
    page, dialogs = hostile_page
    template = copy.deepcopy(KWOK_TEMPLATE) | {"backoffLimit": 0}
    template["podAnnotations"] = {
        f"{SIM}/fail": "true",
        f"{SIM}/fail-after": "1s",
        f"{SIM}/exit-code": "1",
        f"{SIM}/reason": PAYLOAD,
    }
    create_sweep(kube, namespace, sweep_manifest("hostile", template, maxTrials=1, maxFailedTrials=0))
    status = wait_sweep(kube, namespace, "hostile", lambda s: s.get("phase") == "Failed", "the sweep to fail")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert PAYLOAD in failed["message"] and PAYLOAD in status["trials"][0]["reason"], status

    page.goto(f"{admin_ui.base}/#/sweeps/{namespace}/hostile")
    expect(page.get_by_test_id("trials-table")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.locator("main table").last).to_contain_text(PAYLOAD)  # the Conditions table
    assert_nothing_ran(page, dialogs)
