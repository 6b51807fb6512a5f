"""Pods for the local process nodes (tj-local-N): where they are placed, and what they run.

Local nodes carry the label and the NoSchedule taint `ml.example.com/node-runtime=process`, so a pod lands there
only when it asks to (kwok-only tests stay on the fake nodes). `python:3.11-slim` is mapped in
examples/images.yaml to the Python standard library, running as root unless the pod says otherwise.
"""

from __future__ import annotations

import contextlib
import copy
import os
from pathlib import Path
from typing import Any

from tests.kube import Kube, wait_until

NODE_LABEL = "ml.example.com/node-runtime"
LOCAL_NODE_SELECTOR = {NODE_LABEL: "process"}
LOCAL_NODE_TOLERATION = {"key": NODE_LABEL, "operator": "Equal", "value": "process", "effect": "NoSchedule"}
STDLIB_IMAGE = "python:3.11-slim"
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def local_node_names(kube: Kube) -> list[str]:
    nodes = kube.core.list_node(label_selector=f"{NODE_LABEL}=process").items
    return sorted(node.metadata.name for node in nodes)


def python_container(script: str, name: str = "main", **fields: Any) -> dict[str, Any]:
    """A container running `script` with the image's Python, as uid 1000 under PodSecurity `restricted`."""
    return {
        "name": name,
        "image": STDLIB_IMAGE,
        "command": ["python3", "-u", "-c", script],
        "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),
        **fields,
    }


def local_pod(name: str, *containers: dict[str, Any], node: str | None = None, **spec: Any) -> dict[str, Any]:
    """A pod for a local node (a given one with `node`); restartPolicy Never unless `spec` says otherwise."""
    placement: dict[str, Any] = {"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]}
    if node is not None:
        placement["nodeSelector"]["kubernetes.io/hostname"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", **placement, "containers": list(containers), **spec},
    }


def pod_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """The pod's status as plain JSON (API field names)."""
    pod = kube.core.read_namespaced_pod(name, namespace)
    return kube.api.sanitize_for_serialization(pod)["status"]


def wait_for_phase(
    kube: Kube, namespace: str, name: str, phases: tuple[str, ...], timeout: float = 90
) -> dict[str, Any]:
    return wait_until(
        lambda: (status := pod_status(kube, namespace, name)).get("phase") in phases and status,
        timeout,
        f"pod {namespace}/{name} to reach {' or '.join(phases)}",
    )


def container_state(status: dict[str, Any], name: str = "main") -> dict[str, Any]:
    """The container's state ({} before the node reported any)."""
    entries = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return next((c["state"] for c in entries if c["name"] == name), {})


def wait_for_waiting(kube: Kube, namespace: str, name: str, reasons: tuple[str, ...], timeout: float = 60) -> dict:
    """The container `main`'s waiting state once its reason is one of `reasons`."""

    def waiting() -> dict[str, Any] | None:
        state = container_state(pod_status(kube, namespace, name)).get("waiting") or {}
        return state if state.get("reason") in reasons else None

    return wait_until(waiting, timeout, f"pod {namespace}/{name} to wait with reason {' or '.join(reasons)}")


def pod_log(kube: Kube, namespace: str, name: str, container: str = "main", **options: Any) -> str:
    """The log through the API server (raw: the client would turn a JSON-looking log into a Python repr)."""
    response = kube.core.read_namespaced_pod_log(
        name, namespace, container=container, _preload_content=False, **options
    )
    return response.data.decode()


def processes_with(marker: str) -> list[int]:
    """Pids of this machine's processes whose command line contains `marker` (container processes are host
    processes too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in command and b"trainingjob.node.runtime.shim" not in command:
            found.append(int(entry.name))
    return found


def kill_container_process(marker: str, number: int) -> None:
    """Signal, from the host, the container process whose command line contains `marker` (as the OOM killer or an
    administrator would); fails if there is none."""
    pids = processes_with(marker)
    assert pids, f"no process with {marker!r} in its command line"
    os.kill(pids[0], number)


def worker_processes(namespace: str, job: str, index: int) -> list[int]:
    """Pids of the processes a TrainingJob's worker `index` runs on this machine's local nodes, found by the env the
    operator injects (TRAININGJOB_NAMESPACE, TRAININGJOB_NAME, TRAININGJOB_WORKER_INDEX); the node's shim is not
    one of them. `make demo` uses this too, to kill a worker the way the OOM killer would."""
    wanted = {f"TRAININGJOB_NAMESPACE={namespace}", f"TRAININGJOB_NAME={job}", f"TRAININGJOB_WORKER_INDEX={index}"}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = set((entry / "environ").read_bytes().decode(errors="replace").split("\0"))
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if wanted <= environ and b"trainingjob.node.runtime.shim" not in command:
            found.append(int(entry.name))
    return found


def kill_worker(namespace: str, job: str, index: int, number: int = 9) -> list[int]:
    """Signal (SIGKILL by default) every process of the job's worker `index`; fails if it runs none."""
    pids = worker_processes(namespace, job, index)
    assert pids, f"no process of {namespace}/{job} worker {index} on this machine"
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)
    return pids


def endpoint_ready(kube: Kube, namespace: str, service: str) -> bool | None:
    """The `ready` condition of the Service's first endpoint in its EndpointSlices (None: no endpoint yet)."""
    slices = kube.api.call_api(
        f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
        "GET",
        query_params=[("labelSelector", f"kubernetes.io/service-name={service}")],
        response_type="object",
        _return_http_data_only=True,
        auth_settings=["BearerToken"],
    )
    endpoints = [e for s in slices["items"] for e in s.get("endpoints") or []]
    return endpoints[0]["conditions"].get("ready") if endpoints else None
