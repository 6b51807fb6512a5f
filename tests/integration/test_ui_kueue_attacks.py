"""Kueue's words in a real browser (headless Chromium), against a real Kueue (v0.17.0) and the real operator (issue 41).

A waiting job shows why it waits: the message of its Workload's QuotaReserved condition, which the operator copies
into status.queue and status.message and a `Queued` Event. Kueue writes that message, but so can anyone allowed to
write workloads/status (another controller, a tenant with a broad role). Here markup is planted there and must
reach the job's page and its events table as text, never run (test_ui_attacks.py does the same for
what a tenant, a worker and the kubelet write).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.integration.test_kueue_trainingjobs import REACT, queued_job, wait_message
from tests.integration.test_ui_attacks import PAYLOAD, assert_nothing_ran, hostile_page  # noqa: F401 (a fixture)
from tests.integration.ui_support import UI_TIMEOUT_MS, RunningUi
from tests.jobs import create_job
from tests.kube import Kube, wait_until
from tests.kueue_support import GROUP, VERSION, Queues

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kueue_operator")]


def plant_quota_message(kube: Kube, namespace: str, workload: str, message: str) -> None:
    """QuotaReserved=False with `message`, written through the Workload's status subresource as its writer can."""
    body = kube.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", workload)
    conditions = [c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] != "QuotaReserved"]
    planted = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": message,
        "lastTransitionTime": body["metadata"]["creationTimestamp"],
    }
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "workloads", workload, {"status": {"conditions": [*conditions, planted]}}
    )


def test_a_hostile_queue_message_is_shown_as_text_and_never_run(
    hostile_page: tuple[Any, list[str]],  # noqa: F811 (the fixture imported above)
    admin_ui: RunningUi,
    kube: Kube,
    namespace: str,
    queues: Queues,
) -> None:
    page, dialogs = hostile_page
    # No GPU in the ClusterQueue: the job waits for good, and Kueue, with nothing new to try, leaves the Workload's
    # conditions alone once it has said so.
    queues.local_queue("team-a", queues.cluster_queue("empty", queues.flavor(), gpus=0))
    create_job(kube, namespace, queued_job("waiting", "team-a", workers=1, gpus=1))
    status = wait_message(kube, namespace, "waiting", "insufficient")
    workload = (status.get("queue") or {}).get("workload")
    assert workload, status

    plant_quota_message(kube, namespace, workload, f"hostile {PAYLOAD}")
    wait_message(kube, namespace, "waiting", PAYLOAD)  # the operator took it up as it came
    wait_until(
        lambda: any(
            PAYLOAD in (e.message or "")
            for e in kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=waiting").items
        ),
        REACT,
        "a Queued Event with the planted message",
    )

    expect(page.locator(f'tr[data-job="{namespace}/waiting"]').get_by_test_id("queue")).to_contain_text(
        "team-a", timeout=UI_TIMEOUT_MS
    )  # the list holds the job (its row shows no message)
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/waiting")
    expect(page.get_by_test_id("summary")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    expect(page.get_by_test_id("events-table")).to_contain_text(PAYLOAD, timeout=UI_TIMEOUT_MS)
    assert_nothing_ran(page, dialogs)
