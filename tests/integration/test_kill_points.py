"""The operator SIGKILLed at TJ_KILL_POINTS (default 50) random instants while jobs on kwok nodes are created,
scaled, gang-restarted after a worker failure, evicted, suspended and resumed, finished and deleted; then, once it
runs again, nothing is lost, stuck, duplicated or counted twice (issue 41; docs/reliability.md has the figures).

The seed (TJ_KILL_SEED, random by default) draws the jobs' scenarios and the kill instants; it is printed, and
every failure names it. `make chaos` runs more kill points (KILLS=N).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from typing import Any

import pytest

from tests.integration.test_leader_election import adopt, lease_holder
from tests.jobs import get_job
from tests.kill_points import Driver, PodHistory, Scenario
from tests.kill_schedule import Chaos
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
JOBS_IN_FLIGHT = 6
OWNED_KINDS = ("pods", "services", "config_maps", "endpoint_slices")


def kill_count() -> int:
    return int(os.environ.get("TJ_KILL_POINTS") or 50)


def chosen_seed() -> int:
    return int(os.environ.get("TJ_KILL_SEED") or random.SystemRandom().randrange(2**32))


def owned_children(kube: Kube, namespace: str) -> list[tuple[str, str, Any]]:
    """(kind, name, its TrainingJob ownerReference) for every child in the namespace a TrainingJob owns."""
    from kubernetes import client

    lists = {
        "pods": kube.core.list_namespaced_pod,
        "services": kube.core.list_namespaced_service,
        "config_maps": kube.core.list_namespaced_config_map,
        "endpoint_slices": client.DiscoveryV1Api(kube.api).list_namespaced_endpoint_slice,
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


def logged_errors(operator: RunningOperator, since: int) -> list[str]:
    """Lines of the operator's log from offset `since` that report an error or a traceback."""
    with operator.log_path.open("rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    bad = ('"level": "error"', '"level": "critical"', "Traceback")
    return [line[:300] for line in lines if any(mark in line for mark in bad)]


# A round takes about 3 s on an idle machine and up to 17 s at load average 25 on 2 cores.
@pytest.mark.timeout(kill_count() * 20 + 300)
def test_operator_killed_at_random_instants_loses_duplicates_and_double_counts_nothing(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    seed, count = chosen_seed(), kill_count()
    print(f"kill points: TJ_KILL_SEED={seed} TJ_KILL_POINTS={count}")
    began = time.monotonic()
    log_start = operator.log_path.stat().st_size
    history = PodHistory(kube, namespace)
    history.start()
    history.listed.wait(30)
    driver = Driver(kube, namespace, seed, JOBS_IN_FLIGHT)
    identity = wait_until(lambda: lease_holder(kube), 60, "a lease holder")
    template = dataclasses.replace(operator, extra_args=Chaos.arguments(operator, identity))
    chaos = Chaos(template, random.Random(seed), driver)
    operator.stop(hard=True)
    driver.start()
    last = None
    try:
        chaos.kill_rounds(count)
        driver.stopping.set()
        last = chaos.last_start()
        driver.calm_down()
        killed = time.monotonic()
        driver.join(timeout=600)
        converge = time.monotonic() - killed
        assert not driver.errors, f"TJ_KILL_SEED={seed}: {driver.errors}"
        assert not driver.is_alive(), f"TJ_KILL_SEED={seed}: the driver did not finish"
        stray = orphans_after_collection(kube, namespace)
        assert not stray, f"TJ_KILL_SEED={seed}: orphaned children (the garbage collector left them): {stray}"
        history.stopping.set()
        problems = converged_problems(kube, namespace, driver, history)
        assert not problems, f"TJ_KILL_SEED={seed}: " + "\n".join(problems)
        errors = logged_errors(operator, log_start)
        assert not errors, f"TJ_KILL_SEED={seed}: the operators logged errors:\n" + "\n".join(errors[:20])
        assert not driver.held, f"TJ_KILL_SEED={seed}: jobs stored without admission's stamp: {driver.held}"
        print(
            f"TJ_KILL_SEED={seed}: {chaos.summary()}; {len(driver.finished)} jobs played "
            f"({sum(len(s.done) for s in driver.finished)} steps), {len(history.seen)} pods; converged "
            f"{converge:.1f}s after the last kill; {time.monotonic() - began:.0f}s in all; "
            f"pod watch re-listed {history.relists}x"
        )
    finally:
        driver.stopping.set()
        history.stopping.set()
        last = last or chaos.last_start()
        chaos.close()
        adopt(operator, last)
