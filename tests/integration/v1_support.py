"""What the tests of v1, the conversion and the webhooks share: kubectl with its warnings, v1 jobs, and reading a job
in either version."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.jobs import SIM
from tests.kube import Kube, wait_until
from trainingjob.api import constants as c

MANIFESTS = Path(__file__).parent / "manifests"
V1ALPHA1 = f"{c.GROUP}/{c.V1ALPHA1}"
V1 = f"{c.GROUP}/{c.V1}"


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def warnings(self) -> list[str]:
        return [line.removeprefix("Warning: ") for line in self.err.splitlines() if line.startswith("Warning: ")]


def kubectl(cluster: ClusterUnderTest, *args: str, stdin: str | None = None) -> Outcome:
    result = subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Outcome(result.returncode, result.stdout, result.stderr)


def apply(cluster: ClusterUnderTest, manifest: dict[str, Any], namespace: str, *extra: str) -> Outcome:
    return kubectl(cluster, "apply", "-n", namespace, "-f", "-", *extra, stdin=yaml.safe_dump(manifest))


def v1_job(name: str, complete_after: str | None = None, **spec: Any) -> dict[str, Any]:
    """A v1 job the guide's way: a model, the image left to the operator (unless given)."""
    body: dict[str, Any] = {"model": "resnet50", "dataset": "imagenet", "gpusPerWorker": 0, **spec}
    if complete_after:
        body.setdefault("podAnnotations", {})[f"{SIM}/complete-after"] = complete_after
    return {"apiVersion": V1, "kind": c.KIND, "metadata": {"name": name}, "spec": body}


def create(kube: Kube, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    version = manifest["apiVersion"].rpartition("/")[2]
    return kube.custom.create_namespaced_custom_object(c.GROUP, version, namespace, c.PLURAL, manifest)


def read(kube: Kube, namespace: str, name: str, version: str) -> dict[str, Any] | None:
    try:
        return kube.custom.get_namespaced_custom_object(c.GROUP, version, namespace, c.PLURAL, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def state_of(kube: Kube, namespace: str, name: str) -> str | None:
    return ((read(kube, namespace, name, c.V1) or {}).get("status") or {}).get("state")


def wait_state(kube: Kube, namespace: str, name: str, state: str, timeout: float = 90) -> dict[str, Any]:
    wait_until(lambda: state_of(kube, namespace, name) == state, timeout, f"{namespace}/{name} to be {state}")
    return read(kube, namespace, name, c.V1) or {}


def release(kube: Kube, namespace: str, name: str) -> None:
    """Delete a job and wait until it is gone (the operator removes its finalizer)."""
    try:
        kube.custom.delete_namespaced_custom_object(c.GROUP, c.V1, namespace, c.PLURAL, name)
    except ApiException as error:
        if error.status != 404:
            raise
    wait_until(lambda: read(kube, namespace, name, c.V1) is None, 60, f"{namespace}/{name} to be deleted")


def without_server_fields(body: dict[str, Any]) -> dict[str, Any]:
    """A body without what the server changes on every write (for comparing what users wrote)."""
    metadata = {
        key: value
        for key, value in body["metadata"].items()
        if key not in ("resourceVersion", "managedFields", "generation")
    }
    return {**body, "metadata": metadata}
