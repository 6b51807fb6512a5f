"""What must hold once jobs driven through the kill points (tests/kill_points.py) have settled, the operator or the
control plane faulted meanwhile: no two pods for one worker and attempt, every finished job's status equal to its
children and its scenario's counters, nothing left of a deleted job, no orphaned child, no job no scenario finished.

Only plain functions of the cluster and the driver's record: tests/kill_points.py calls them (`converge`), so this
module imports its types for annotations only.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from tests.jobs import get_job
from tests.kube import Kube
from trainingjob.api import constants as k

if TYPE_CHECKING:
    from tests.kill_points import Driver, PodHistory, Scenario
    from tests.operator_harness import RunningOperator

OWNED_KINDS = ("pods", "services", "config_maps", "endpoint_slices", "persistent_volume_claims")


def owned_children(kube: Kube, namespace: str) -> list[tuple[str, str, Any]]:
    """(kind, name, its TrainingJob ownerReference) for every child in the namespace a TrainingJob owns."""
    from kubernetes import client

    lists = {
        "pods": kube.core.list_namespaced_pod,
        "services": kube.core.list_namespaced_service,
        "config_maps": kube.core.list_namespaced_config_map,
        "endpoint_slices": client.DiscoveryV1Api(kube.api).list_namespaced_endpoint_slice,
        "persistent_volume_claims": kube.core.list_namespaced_persistent_volume_claim,  # checkpoints, when owned
    }
    found = []
    for kind in OWNED_KINDS:
        for item in lists[kind](namespace).items:
            for owner in item.metadata.owner_references or ():
                if owner.kind == k.KIND:
                    found.append((kind, item.metadata.name, owner))
    return found


def orphans(kube: Kube, namespace: str) -> list[str]:
    """Children whose owning TrainingJob (by name and uid) no longer exists."""
    jobs = kube.custom.list_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL)["items"]
    uids = {job["metadata"]["uid"] for job in jobs}
    return [
        f"{kind}/{name} of {owner.name}"
        for kind, name, owner in owned_children(kube, namespace)
        if owner.uid not in uids
    ]


def orphans_after_collection(kube: Kube, namespace: str, timeout: float = 60) -> list[str]:
    """The orphans still there after up to `timeout` seconds of the garbage collector's work."""
    deadline = time.monotonic() + timeout
    while (found := orphans(kube, namespace)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def status_against_pods(kube: Kube, namespace: str, scenario: Scenario) -> list[str]:
    """A finished job's status against its pods and the scenario: phase, counters, attempt, each worker entry."""
    job = get_job(kube, namespace, scenario.name) or {}
    status = job.get("status") or {}
    problems = []
    counted = (status.get("phase"), status.get("restartCount", 0), status.get("disruptionCount", 0))
    wanted = ("Succeeded", scenario.failures, scenario.evictions)
    if counted != wanted or status.get("attempt", 0) != scenario.attempt:
        problems.append(
            f"{scenario.name}: (phase, restarts, disruptions) {counted}, attempt {status.get('attempt')}; "
            f"wanted {wanted}, attempt {scenario.attempt}"
        )
    if job.get("metadata", {}).get("deletionTimestamp"):
        problems.append(f"{scenario.name}: still being deleted (finalizer {job['metadata'].get('finalizers')})")
    pods = {
        p.metadata.name: p
        for p in kube.core.list_namespaced_pod(namespace, label_selector=f"{k.LABEL_JOB_NAME}={scenario.name}").items
    }
    for entry in status.get("workerStatuses") or ():
        pod = pods.get(entry.get("podName", ""))
        shown = "Deleted" if pod is None else "Terminating" if pod.metadata.deletion_timestamp else pod.status.phase
        if entry.get("phase") != shown:
            problems.append(
                f"{scenario.name}: status says {entry.get('podName')} is {entry.get('phase')}, it is {shown}"
            )
        if pod is not None and pod.metadata.labels.get(k.LABEL_ATTEMPT) != str(scenario.attempt):
            problems.append(
                f"{scenario.name}: pod {pod.metadata.name} of attempt {pod.metadata.labels.get(k.LABEL_ATTEMPT)}"
            )
    return problems


def deleted_leftovers(kube: Kube, namespace: str, scenario: Scenario) -> list[str]:
    """A deleted job's object (finalizer not cleared) and children still labelled with its name."""
    left = [f"{scenario.name} still exists"] if get_job(kube, namespace, scenario.name) is not None else []
    selector = f"{k.LABEL_JOB_NAME}={scenario.name}"
    for pod in kube.core.list_namespaced_pod(namespace, label_selector=selector).items:
        left.append(f"{scenario.name}: pod {pod.metadata.name} left behind")
    return left


def logged_errors(operator: RunningOperator, since: int) -> list[str]:
    """Lines of the operator's log from offset `since` that report an error or a traceback (every operator the
    kill points start appends to the session operator's log)."""
    with operator.log_path.open("rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    bad = ('"level": "error"', '"level": "critical"', "Traceback")
    return [shown(line) for line in lines if any(mark in line for mark in bad)]


def shown(line: str) -> str:
    """A log line cut to 300 characters, with its traceback's last line (the exception) kept: CI's report of the
    first such failure cut it off, and the cause had to be guessed."""
    try:
        record = json.loads(line)
    except ValueError:
        return line[:300]
    exception = str(record.get("exc_info", "")).strip().splitlines() if isinstance(record, dict) else []
    return line[:300] + (f" ... raised {exception[-1][:300]}" if exception else "")


def converged_problems(kube: Kube, namespace: str, driver: Driver, history: PodHistory) -> list[str]:
    problems = [f"two pods for {key}: {uids}" for key, uids in history.duplicates().items()]
    for scenario in driver.finished:
        if scenario.end == "finish":
            problems += status_against_pods(kube, namespace, scenario)
        else:
            problems += deleted_leftovers(kube, namespace, scenario)
    known = {scenario.name for scenario in driver.finished}
    jobs = kube.custom.list_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL)["items"]
    problems += [
        f"{job['metadata']['name']}: no scenario finished it" for job in jobs if job["metadata"]["name"] not in known
    ]
    return problems
