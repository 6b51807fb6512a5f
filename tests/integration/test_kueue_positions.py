"""A waiting TrainingJob's place in Kueue's queues, as `tj get`, `tj describe` and the UI show it, read from a real
Kueue's (v0.17.0) visibility API: positions in the ClusterQueue and in the LocalQueue, and how they move when a job
ahead is admitted, with no change to the waiting job itself (the operator does not write positions into status).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.conftest import ClusterUnderTest
from tests.gang_support import finish
from tests.integration.test_cli_jobs import tj
from tests.integration.test_kueue_trainingjobs import REACT, queued_job, wait_message
from tests.integration.ui_support import UI_TIMEOUT_MS, RunningUi, screenshot
from tests.jobs import create_job, wait_phase
from tests.kube import Kube, wait_until
from tests.kueue_support import Queues, pending_workloads

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]


def table(text: str) -> dict[str, dict[str, str]]:
    """`tj get`'s table, row by NAME."""
    lines = [line.split() for line in text.strip().splitlines()]
    return {cells[0]: dict(zip(lines[0], cells, strict=True)) for cells in lines[1:]}


def test_waiting_jobs_show_their_queues_positions_and_time_queued_in_tj_and_the_ui(
    kube: Kube, namespace: str, queues: Queues, cluster: ClusterUnderTest, page: Any, admin_ui: RunningUi
) -> None:
    cluster_queue = queues.cluster_queue("gpus", queues.flavor(), gpus=8)
    queues.local_queue("team-a", cluster_queue)
    queues.local_queue("team-b", cluster_queue)
    create_job(kube, namespace, queued_job("first", "team-a"))  # takes all 8 GPUs
    wait_phase(kube, namespace, "first", "Running", timeout=REACT)
    for name, queue in (("a1", "team-a"), ("b1", "team-b"), ("a2", "team-a")):
        create_job(kube, namespace, queued_job(name, queue))
        wait_message(kube, namespace, name, "insufficient unused quota")
        time.sleep(1.1)  # Kueue orders equal priorities by creation time, which has whole seconds
    wait_until(
        lambda: (
            len(pending_workloads(cluster, namespace, "team-a")) == 2
            and len(pending_workloads(cluster, namespace, "team-b")) == 1
        ),
        REACT,
        "Kueue's pending lists to hold the three jobs",
    )

    listed = tj(cluster, "get", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    rows = table(listed.stdout)
    # Same priority: Kueue's ClusterQueue orders them by creation (BestEffortFIFO), across both LocalQueues.
    assert {n: (rows[n]["QUEUE"], rows[n]["POSITION"]) for n in ("a1", "b1", "a2")} == {
        "a1": ("team-a", "1"),
        "b1": ("team-b", "2"),
        "a2": ("team-a", "3"),
    }, listed.stdout
    assert (rows["first"]["QUEUE"], rows["first"]["POSITION"]) == ("team-a", "-")  # admitted: no position
    described = tj(cluster, "describe", "a2", "-n", namespace)
    assert described.returncode == 0, described.stderr
    text = " ".join(described.stdout.split())
    assert f"Position: 3 in ClusterQueue {cluster_queue}, 2 in LocalQueue team-a" in text, described.stdout
    assert f"Queue: LocalQueue team-a of ClusterQueue {cluster_queue}" in text
    assert "Queued for:" in text and "insufficient unused quota" in text
    watched = tj(cluster, "watch", "a2", "-n", namespace, "--timeout", "5")
    assert watched.returncode == 2 and f"position 3 in ClusterQueue {cluster_queue}" in watched.stdout, watched

    page.goto(f"{admin_ui.base}/#/")
    row = page.locator(f'tr[data-job="{namespace}/a2"]')
    expect(row.get_by_test_id("queue-position")).to_have_text("#3", timeout=UI_TIMEOUT_MS)
    expect(row.get_by_test_id("queue")).to_contain_text("team-a")
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/a2")
    position = page.get_by_test_id("job-position")
    expect(position).to_have_text(f"#3 in ClusterQueue {cluster_queue}, #2 in LocalQueue team-a", timeout=UI_TIMEOUT_MS)

    finish(kube, namespace, "first")  # a1 is admitted: the others move up (read again, not written to them)
    wait_phase(kube, namespace, "a1", "Running", timeout=REACT)
    expect(position).to_have_text(f"#2 in ClusterQueue {cluster_queue}, #1 in LocalQueue team-a", timeout=UI_TIMEOUT_MS)
    screenshot(page, "ui-queue-position")
    page.goto(f"{admin_ui.base}/#/")
    expect(page.locator(f'tr[data-job="{namespace}/a2"]').get_by_test_id("queue-position")).to_have_text(
        "#2", timeout=UI_TIMEOUT_MS
    )
    expect(page.locator(f'tr[data-job="{namespace}/a1"]').get_by_test_id("queue")).to_have_text(
        "team-a", timeout=UI_TIMEOUT_MS
    )
    assert table(tj(cluster, "get", "a2", "-n", namespace).stdout)["a2"]["POSITION"] == "2"
