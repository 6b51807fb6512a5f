"""Helpers for tests that drive TrainingJobs through the real API server and operator."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

SIM = "sim.ml.example.com"


def job_manifest(
    name: str, framework: str = "pytorch", workers: int = 1, complete_after: str | None = "2s", **spec: Any
) -> dict[str, Any]:
    """A TrainingJob whose workers kwok completes after `complete_after` (None: they run until told)."""
    annotations = dict(spec.pop("podAnnotations", {}))
    if complete_after:
        annotations[f"{SIM}/complete-after"] = complete_after
    body = {
        "framework": framework,
        "image": "registry.example/train:1",
        "command": ["python", "train.py"],
        "workers": workers,
        **spec,
    }
    if annotations:
        body["podAnnotations"] = annotations
    return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": {"name": name}, "spec": body}


def create_job(kube: Kube, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return kube.custom.create_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, manifest)


def get_job(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return kube.custom.get_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def patch_job(kube: Kube, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    return kube.custom.patch_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, name, patch)


def delete_job(kube: Kube, namespace: str, name: str) -> None:
    kube.custom.delete_namespaced_custom_object(k.GROUP, k.VERSION, namespace, k.PLURAL, name)


def phase_of(job: dict[str, Any] | None) -> str | None:
    return ((job or {}).get("status") or {}).get("phase")


def wait_phase(kube: Kube, namespace: str, name: str, phase: str, timeout: float = 90) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        nonlocal last
        last = get_job(kube, namespace, name) or {}
        return last if phase_of(last) == phase else None

    try:
        return wait_until(reached, timeout, f"{namespace}/{name} to be {phase}")
    except AssertionError as error:
        raise AssertionError(f"{error}; last status: {json.dumps(last.get('status'), indent=1)}") from None


def job_pods(kube: Kube, namespace: str, name: str) -> list[Any]:
    pods = kube.core.list_namespaced_pod(namespace, label_selector=f"{k.LABEL_JOB_NAME}={name}").items
    return sorted(pods, key=lambda p: int(p.metadata.labels[k.LABEL_WORKER_INDEX]))


def live_pods(kube: Kube, namespace: str, name: str) -> list[Any]:
    return [p for p in job_pods(kube, namespace, name) if p.metadata.deletion_timestamp is None]


def env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env or []}


def event_reasons(kube: Kube, namespace: str, name: str) -> list[str]:
    events = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.reason for e in events if e.involved_object.kind == k.KIND]


def kubectl(cluster: Any, *args: str) -> str:
    result = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout
