"""A finished job looks finished everywhere, on a real job whose workers run on a local process node: once worker 1
fails (restartPolicy Never), the job Fails, cleanup deletes worker 0, and then status, `tj watch`, `tj describe`,
`tj logs` and the UI show no running worker; suspend and scale are refused by `tj` and not offered by the UI."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.integration.test_cli_jobs import tj
from tests.integration.ui_support import RunningUi
from tests.jobs import create_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

# Rank 1 fails once rank 0 has said something; rank 0 would train on, and stops on the cleanup's SIGTERM.
WORKER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
rank = int(os.environ["RANK"])
print(f"rank {rank} started", flush=True)
if rank == 1:
    time.sleep(2)
    print("rank 1 fails", flush=True)
    sys.exit(3)
while True:
    time.sleep(1)
"""


def failing_job(name: str) -> dict[str, Any]:
    return job_manifest(
        name,
        workers=2,
        complete_after=None,
        image=STDLIB_IMAGE,
        command=["python3", "-u", "-c", WORKER],
        restartPolicy="Never",
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        scheduling={"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
    )


def worker_phases(kube: Kube, namespace: str, name: str) -> dict[int, str]:
    status = (get_job(kube, namespace, name) or {}).get("status") or {}
    return {w["workerId"]: w["phase"] for w in status.get("workerStatuses") or []}


def finished_job(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """Run the failing job to its end and until cleanup has removed worker 0's pod; return the job."""
    create_job(kube, namespace, failing_job(name))
    wait_phase(kube, namespace, name, "Failed", timeout=120)
    wait_until(
        lambda: worker_phases(kube, namespace, name) == {0: "Deleted", 1: "Failed"},
        60,
        "worker 0 Deleted and worker 1 Failed in the status",
    )
    job = get_job(kube, namespace, name)
    assert job is not None
    return job


def test_a_failed_job_shows_no_running_worker_in_status_and_tj(cluster, kube: Kube, namespace: str) -> None:
    job = finished_job(kube, namespace, "ends")
    status = job["status"]
    deleted, failed = sorted(status["workerStatuses"], key=lambda w: w["workerId"])
    assert (deleted["reason"], deleted["message"]) == ("PodDeleted", "the pod was deleted after the job finished")
    assert (failed["exitCode"], failed["reason"]) == (3, "Error")
    assert status["workers"] == 1  # the failed pod stays (cleanPodPolicy Running); the other one is gone
    pods = kube.core.list_namespaced_pod(namespace, label_selector="ml.example.com/job-name=ends").items
    assert [p.metadata.name for p in pods] == ["ends-worker-1"]

    watched = tj(cluster, "watch", "ends", "-n", namespace, "--timeout", "30")
    assert watched.returncode == 1
    assert "Failed · no worker running" in watched.stdout + watched.stderr
    assert "running" not in (watched.stdout + watched.stderr).replace("no worker running", "")

    described = tj(cluster, "describe", "ends", "-n", namespace)
    worker_lines = [line for line in described.stdout.splitlines() if re.match(r"\s+\d+\s+ends-worker-", line)]
    assert len(worker_lines) == 2 and not any("Running" in line for line in worker_lines), described.stdout
    assert "Deleted" in worker_lines[0] and "PodDeleted" in worker_lines[0]

    gone = tj(cluster, "logs", "ends", "-n", namespace, "--worker", "0")
    assert gone.returncode == 1
    assert gone.stderr.strip() == (
        f"error: worker 0 of trainingjob {namespace}/ends is gone: its pod was deleted after the job failed, "
        "and its log went with it"
    )
    kept = tj(cluster, "logs", "ends", "-n", namespace, "--worker", "1")
    assert kept.returncode == 0 and kept.stdout.splitlines() == ["rank 1 started", "rank 1 fails"]

    for command, action in (
        (["suspend"], "suspended"),
        (["resume"], "resumed"),
        (["scale", "--workers", "3"], "scaled"),
    ):
        refused = tj(cluster, command[0], "ends", *command[1:], "-n", namespace)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"error: trainingjob {namespace}/ends has already failed: a finished job cannot be {action}; "
            "submit it again (under a new name, or after tj delete) to run it again"
        )
    spec = get_job(kube, namespace, "ends")["spec"]
    assert (spec["workers"], spec.get("suspend", False)) == (2, False)


def test_the_ui_offers_only_delete_and_says_removed_workers_have_no_log(
    page: Any, admin_ui: RunningUi, kube: Kube, namespace: str
) -> None:
    finished_job(kube, namespace, "over")
    page.goto(f"{admin_ui.base}/#/jobs/{namespace}/over")
    expect(page.get_by_test_id("summary").get_by_test_id("phase")).to_have_text("Failed")
    expect(page.get_by_test_id("job-workers")).to_have_text("none running")
    expect(page.get_by_test_id("finished-note")).to_contain_text("This job has failed")
    expect(page.get_by_test_id("delete")).to_be_visible()
    for action in ("suspend", "resume", "scale", "scale-input"):
        expect(page.get_by_test_id(action)).to_have_count(0)
    table = page.get_by_test_id("workers-table")
    expect(table).to_contain_text("Deleted")
    expect(table).not_to_contain_text("Running")

    picker = page.get_by_test_id("log-worker")
    expect(picker).to_contain_text("worker 0 (over-worker-0, pod deleted, no log)")
    picker.select_option("over-worker-0")
    page.get_by_test_id("log-show").click()
    expect(page.get_by_test_id("log-gone")).to_have_text(
        "over-worker-0 is gone: its pod was deleted after the job finished, and its log went with it."
    )
    picker.select_option("over-worker-1")
    page.get_by_test_id("log-show").click()
    expect(page.get_by_test_id("log-output")).to_contain_text("rank 1 fails")
    row = page.locator(f'[data-job="{namespace}/over"]')
    page.goto(f"{admin_ui.base}/#/")
    expect(row.get_by_test_id("workers")).to_have_text("0/2")
