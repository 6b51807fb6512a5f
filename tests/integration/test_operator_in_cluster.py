"""The shipped Deployment, run for real: the operator in a pod on a local process node, with the ServiceAccount
token and CA the pod gets mounted (the in-cluster credential path, not a kubeconfig), as uid 65532 with a
read-only root filesystem, its Lease identity the pod's name from the downward API.

The image is the local stand-in of the Dockerfile's (examples/images.yaml). The Deployment is the namespaced
overlay's (it watches ml-team-a), changed only where a shared test cluster needs it: one replica, its own Lease
and selector, placed on a local node, and its webhooks off (the session's operator serves them; a second server
would take over their registration). The session's operator watches every namespace, so what shows this
pod at work is its own metrics and log, not who created the workers.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import ClusterUnderTest
from tests.integration import deploy_support
from tests.integration.deploy_support import OVERLAYS, WATCHED, render
from tests.integration.test_deploy_rbac_enforced import release_job
from tests.jobs import create_job, delete_job, get_job, job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.metrics import scrape_url, value
from tests.operator_harness import OPERATOR_NAMESPACE

pytestmark = pytest.mark.integration

installed_rbac = deploy_support.installed_rbac

NAME = "in-cluster-operator"
LEASE = "in-cluster-operator-test"
INSTANCE = {"app.kubernetes.io/instance": NAME}
NODE = "tj-local-0"
PROCESS_NODE = {"key": "ml.example.com/node-runtime", "operator": "Equal", "value": "process", "effect": "NoSchedule"}
# A first start builds nothing (the runtime is built by `make runtimes`) but imports the operator on a busy machine.
START = 180


def in_cluster_deployment(cluster: ClusterUnderTest) -> dict[str, Any]:
    """The namespaced overlay's Deployment with the changes the module docstring lists, and no others."""
    [deployment] = [d for d in render(cluster, OVERLAYS["namespaced"]) if d["kind"] == "Deployment"]
    deployment["metadata"]["name"] = NAME
    spec = deployment["spec"]
    spec["replicas"] = 1
    spec["selector"]["matchLabels"].update(INSTANCE)
    spec["template"]["metadata"]["labels"].update(INSTANCE)
    pod = spec["template"]["spec"]
    pod["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    pod["tolerations"] = [PROCESS_NODE]
    args = pod["containers"][0]["args"]
    args[args.index("--webhook-port") + 1] = "0"
    args += ["--leader-election-id", LEASE]
    return deployment


@pytest.fixture
def operator_pod(cluster: ClusterUnderTest, kube: Kube, installed_rbac: None) -> Iterator[client.V1Pod]:
    apps = client.AppsV1Api(kube.api)
    coordination = client.CoordinationV1Api(kube.api)
    apps.create_namespaced_deployment(OPERATOR_NAMESPACE, in_cluster_deployment(cluster))
    try:
        yield wait_until(lambda: running_pod(kube), START, "the operator's pod running on the local node", interval=1)
    finally:
        apps.delete_namespaced_deployment(NAME, OPERATOR_NAMESPACE)
        wait_until(lambda: not pods(kube), 60, "the operator's pod gone", interval=1)
        with contextlib.suppress(client.ApiException):
            coordination.delete_namespaced_lease(LEASE, OPERATOR_NAMESPACE)


def pods(kube: Kube) -> list[client.V1Pod]:
    selector = ",".join(f"{key}={value}" for key, value in INSTANCE.items())
    return kube.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=selector).items


def running_pod(kube: Kube) -> client.V1Pod | None:
    found = pods(kube)
    return found[0] if len(found) == 1 and found[0].status.phase == "Running" else None


def lease(kube: Kube) -> client.V1Lease | None:
    try:
        return client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def log(kube: Kube, pod: client.V1Pod) -> str:
    return kube.core.read_namespaced_pod_log(pod.metadata.name, OPERATOR_NAMESPACE, container="operator")


def metrics(pod: client.V1Pod) -> dict[tuple[str, tuple], float]:
    try:
        return scrape_url(f"http://{pod.status.pod_ip}:9090/metrics")
    except OSError:
        return {}


def operator_processes() -> list[int]:
    """The container's operator process as this host sees it (a local node runs pods as host processes)."""
    marker = f"--leader-election-id\0{LEASE}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def test_the_shipped_deployment_runs_the_operator_in_cluster_and_a_restarted_container_keeps_its_lease(
    kube: Kube, operator_pod: client.V1Pod
) -> None:
    name = operator_pod.metadata.name
    held = wait_until(lambda: (found := lease(kube)) and found.spec.holder_identity and found, 60, "the Lease taken")
    assert held.spec.holder_identity == name  # POD_NAME from the downward API, not a random identity
    create_job(kube, WATCHED, job_manifest("in-cluster", workers=2, complete_after=None))
    try:
        wait_phase(kube, WATCHED, "in-cluster", "Running")
        samples = wait_until(
            lambda: (s := metrics(operator_pod)) and value(s, "trainingjob_jobs", phase="Running") == 1 and s,
            60,
            "the in-cluster operator to see the job Running in its own cache",
        )
        assert value(samples, "trainingjob_operator_leader") == 1
        text = log(kube, operator_pod)
        assert f"identity {name}" in text, text[-3000:]
        assert '"level": "error"' not in text and "Forbidden" not in text, text[-3000:]

        # The container dies (kill -9 of its process); the node restarts it in the same pod, under the same name.
        [pid] = operator_processes()
        os.kill(pid, signal.SIGKILL)
        restarted = wait_until(
            lambda: (p := running_pod(kube)) and (p.status.container_statuses[0].restart_count or 0) >= 1 and p,
            START,
            "the operator's container restarted",
            interval=1,
        )
        assert restarted.metadata.name == name
        wait_until(lambda: f"identity {name}" in log(kube, restarted), START, "the restarted container to lead")
        again = lease(kube)
        # It re-took its own Lease: no transition, the first acquisition kept, renewed since the restart.
        assert again.spec.holder_identity == name
        assert again.spec.lease_transitions == held.spec.lease_transitions
        assert again.spec.acquire_time == held.spec.acquire_time
        assert again.spec.renew_time > held.spec.renew_time
        wait_until(lambda: value(metrics(restarted), "trainingjob_operator_leader") == 1, 60, "its metrics again")
        delete_job(kube, WATCHED, "in-cluster")
        wait_until(lambda: get_job(kube, WATCHED, "in-cluster") is None, 60, "the job's finalizer released")
    finally:
        release_job(kube, WATCHED, "in-cluster")
