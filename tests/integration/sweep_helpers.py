"""TrainingSweeps through the real API server, for the sweep tests."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as k


def sweep_manifest(name: str, template_spec: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "trialTemplate": {"spec": template_spec},
        "parameters": [
            {"name": "learningRate", "type": "float", "min": 0.01, "max": 0.5, "log": True},
            {"name": "maxDepth", "type": "int", "min": 1, "max": 6},
        ],
        "objective": {"metric": "accuracy"},
        **spec,
    }
    return {"apiVersion": k.SWEEP_API_VERSION, "kind": k.SWEEP_KIND, "metadata": {"name": name}, "spec": body}


def create_sweep(kube: Kube, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return kube.custom.create_namespaced_custom_object(k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, manifest)


def get_sweep(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.custom.get_namespaced_custom_object(k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, name)


def refusal(kube: Kube, namespace: str, manifest: dict[str, Any]) -> str:
    """The API server's message refusing `manifest` (the test fails if it is stored)."""
    try:
        create_sweep(kube, namespace, manifest)
    except ApiException as error:
        assert error.status == 422, error.body
        return str(error.body)
    raise AssertionError(f"{manifest['metadata']['name']} was accepted")


def trials(kube: Kube, namespace: str, sweep: str) -> list[dict[str, Any]]:
    found = kube.custom.list_namespaced_custom_object(
        k.GROUP, k.V1, namespace, k.PLURAL, label_selector=f"{k.LABEL_SWEEP}={sweep}"
    )["items"]
    return sorted(found, key=lambda t: int(t["metadata"]["labels"][k.LABEL_TRIAL_INDEX]))


def wait_sweep(kube: Kube, namespace: str, name: str, done: Any, what: str, timeout: float = 120) -> dict[str, Any]:
    """The sweep's status once `done(status)` holds."""
    found: dict[str, Any] = {}

    def check() -> bool:
        found.update(get_sweep(kube, namespace, name).get("status") or {})
        return bool(done(found))

    wait_until(check, timeout, what, interval=1)
    return found


def events_of(kube: Kube, namespace: str, name: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events on object `name`."""
    listed = kube.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(event.reason, event.message) for event in listed]
