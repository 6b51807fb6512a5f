"""Helpers for gang scheduling tests: a GPU pool of the test's own (kwok nodes only its workers may use), jobs
placed on it, and what the API server holds about their gangs.

The pool's nodes are tainted for the test's namespace, so the shared nodes' 32 GPUs and other tests' pods stay out
of the arithmetic: "6 free GPUs" means exactly that.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.jobs import SIM, get_job, job_manifest, job_pods
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k
from trainingjob.cluster.manifests import fake_node
from trainingjob.scheduling.gang import NativeWorkload

POOL_LABEL = "ml.example.com/test-pool"
WORKLOADS = NativeWorkload.api
REACT = 60


def node_ready(kube: Kube, name: str) -> bool:
    conditions = kube.core.read_node(name).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def gpu_pool(kube: Kube, namespace: str, nodes: int, gpus: int) -> Iterator[list[str]]:
    """`nodes` kwok nodes of `gpus` GPUs each, labelled and tainted for `namespace`; deleted afterwards."""
    names = []
    for index in range(nodes):
        node = fake_node(index)
        name = f"tj-pool-{namespace}-{index}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"].update({"kubernetes.io/hostname": name, POOL_LABEL: namespace})
        node["spec"] = {"taints": [{"key": POOL_LABEL, "value": namespace, "effect": "NoSchedule"}]}
        for field in ("capacity", "allocatable"):
            node["status"][field][k.GPU_RESOURCE] = str(gpus)
        kube.core.create_node(node)
        names.append(name)
    for name in names:
        wait_until(lambda name=name: node_ready(kube, name), REACT, f"node {name} to be Ready")
    yield names
    for name in names:
        try:
            kube.core.delete_node(name)
        except ApiException as error:
            if error.status != 404:
                raise


def pool_job(name: str, namespace: str, workers: int = 4, **spec: Any) -> dict[str, Any]:
    """A job of `workers` x 1 GPU placed on the test's pool; its workers run until told to finish."""
    scheduling = {
        "nodeSelector": {POOL_LABEL: namespace},
        "tolerations": [{"key": POOL_LABEL, "operator": "Equal", "value": namespace, "effect": "NoSchedule"}],
        **spec.pop("scheduling", {}),
    }
    return job_manifest(name, workers=workers, complete_after=None, gpuPerWorker=1, scheduling=scheduling, **spec)


def finish(kube: Kube, namespace: str, name: str) -> None:
    """Tell kwok the job's running workers are done: they succeed now."""
    for pod in job_pods(kube, namespace, name):
        if pod.metadata.deletion_timestamp is None and pod.status.phase == "Running":
            patch = {"metadata": {"annotations": {f"{SIM}/complete-after": "0s"}}}
            kube.core.patch_namespaced_pod(pod.metadata.name, namespace, patch)


def bound(pods: list[Any]) -> list[str]:
    return [p.metadata.name for p in pods if p.spec.node_name]


def workloads(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    api = WORKLOADS
    items = kube.custom.list_namespaced_custom_object(api.group, api.version, namespace, api.plural)["items"]
    return {item["metadata"]["name"]: item for item in items if item["metadata"].get("deletionTimestamp") is None}


def min_count(workload: dict[str, Any]) -> int:
    [group] = workload["spec"]["podGroups"]
    return group["policy"]["gang"]["minCount"]


def gang_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return ((get_job(kube, namespace, name) or {}).get("status") or {}).get("gang") or {}


def condition(kube: Kube, namespace: str, name: str, condition_type: str) -> dict[str, Any] | None:
    conditions = ((get_job(kube, namespace, name) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == condition_type), None)


def wait_gang(kube: Kube, namespace: str, name: str, state: str, timeout: float = REACT) -> dict[str, Any]:
    return wait_until(
        lambda: (g := gang_status(kube, namespace, name)).get("state") == state and g,
        timeout,
        f"{name}'s gang to be {state}",
    )
