"""Resource limits enforced by the kernel on the local process nodes: a container that allocates past its memory
limit is OOM-killed (OOMKilled, exit code 137, as `kubectl describe pod` shows it on a real node), the operator's
exit-code rules see that real reason, and a CPU limit throttles a busy container (its cgroup's CFS quota and
throttling counter, read on the host)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TEST_CLUSTER_NAME, ClusterUnderTest
from tests.jobs import create_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import (
    LOCAL_NODE_SELECTOR,
    LOCAL_NODE_TOLERATION,
    RESTRICTED_CONTAINER,
    STDLIB_IMAGE,
    container_state,
    local_pod,
    pod_status,
    python_container,
    wait_for_phase,
)
from trainingjob.cluster.paths import cluster_dir

pytestmark = pytest.mark.integration

# Touches every page (b"\x01" * n is filled, where bytearray(n) would be zero pages never charged), 256 MiB in all,
# then exits 0: without an enforced limit the pod Succeeds and the test fails.
HOG = """
import time
chunks = []
for _ in range(16):
    chunks.append(b"\\x01" * (16 * 2**20))
    time.sleep(0.02)
print("allocated", sum(map(len, chunks)), flush=True)
"""
BUSY = "while True: pass"


def test_a_container_past_its_memory_limit_is_oom_killed_as_on_a_real_node(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    limits = {"memory": "64Mi", "cpu": "500m"}
    pod = local_pod("hog", python_container(HOG, resources={"limits": limits, "requests": limits}))
    kube.core.create_namespaced_pod(namespace, pod)
    status = wait_for_phase(kube, namespace, "hog", ("Failed", "Succeeded"), timeout=120)
    terminated = container_state(status)["terminated"]
    assert (status["phase"], terminated["reason"], terminated["exitCode"]) == ("Failed", "OOMKilled", 137)
    described = subprocess.run(
        [cluster.kubectl, "--kubeconfig", str(cluster.kubeconfig), "describe", "pod", "hog", "-n", namespace],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert re.search(r"State:\s+Terminated\n\s+Reason:\s+OOMKilled\n\s+Exit Code:\s+137\n", described), described
    assert re.search(r"Limits:\n\s+cpu:\s+500m\n\s+memory:\s+64Mi\n", described), described


@pytest.mark.usefixtures("operator")
def test_the_exit_code_policy_retries_a_real_oom_kill_and_reports_it(kube: Kube, namespace: str) -> None:
    manifest = job_manifest(
        "oom",
        workers=1,
        complete_after=None,
        image=STDLIB_IMAGE,
        command=["python3", "-u", "-c", HOG],
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        resources={"limits": {"memory": "64Mi", "cpu": "500m"}},
        scheduling={"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
        restartPolicy="ExitCode",
        backoffLimit=1,
        failurePolicy={"backoff": {"baseSeconds": 1, "maxSeconds": 1}},
    )
    create_job(kube, namespace, manifest)
    failed = wait_phase(kube, namespace, "oom", "Failed", timeout=240)["status"]
    # 137 is retryable under ExitCode: one restart, then the backoff limit; each failure was the kernel's OOM kill.
    assert failed["restartCount"] == 1, failed
    assert (failed["lastFailure"]["exitCode"], failed["lastFailure"]["reason"]) == (137, "OOMKilled"), failed
    reason = next(c for c in failed["conditions"] if c["type"] == "Failed")["reason"]
    assert reason == "BackoffLimitExceeded", failed


def container_cgroups(namespace: str, name: str, kube: Kube) -> list[Path]:
    """The cgroup directories the node put the pod's first container attempt in (its launch file, on the host)."""
    pod = kube.core.read_namespaced_pod(name, namespace)
    launch = (
        cluster_dir(TEST_CLUSTER_NAME)
        / "nodes"
        / pod.spec.node_name
        / "pods"
        / pod.metadata.uid
        / "containers"
        / "main"
        / "0"
        / "launch.json"
    )
    return [Path(d) for d in json.loads(launch.read_text())["cgroups"]]


def cpu_stat(directories: list[Path]) -> dict[str, int]:
    for directory in directories:
        if (directory / "cpu.stat").exists() and (
            (directory / "cpu.cfs_quota_us").exists() or (directory / "cpu.max").exists()
        ):
            lines = (directory / "cpu.stat").read_text().split("\n")
            stat = {k: int(v) for k, v in (line.split() for line in lines if line.strip())}
            quota = (
                (directory / "cpu.cfs_quota_us").read_text().strip()
                if (directory / "cpu.cfs_quota_us").exists()
                else (directory / "cpu.max").read_text().split()[0]
            )
            return {**stat, "quota_us": int(quota)}
    raise AssertionError(f"no cpu cgroup among {directories}")


def test_a_cpu_limit_throttles_a_busy_container(kube: Kube, namespace: str) -> None:
    limits = {"cpu": "100m", "memory": "64Mi"}
    pod = local_pod("busy", python_container(BUSY, resources={"limits": limits, "requests": limits}))
    kube.core.create_namespaced_pod(namespace, pod)
    wait_for_phase(kube, namespace, "busy", ("Running",))
    directories = container_cgroups(namespace, "busy", kube)
    stat = wait_until(
        lambda: (s := cpu_stat(directories))["nr_throttled"] >= 5 and s, 60, "the busy container to be throttled"
    )
    assert stat["quota_us"] == 10_000, stat  # 100m of a 100 ms period
    assert pod_status(kube, namespace, "busy")["phase"] == "Running"
