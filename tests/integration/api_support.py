"""What the API-server tests of the TrainingJob schema share: a minimal valid job with overrides, creating and
reading it, the 422 message of a rejected call, and `served_crd`.

`served_crd` is a module-scoped autouse fixture: each test module of the API binds it (`served_crd =
api_support.served_crd`), so it runs once per module (cheap: `trainingjob_crd` installs the CRD once per session;
this only waits until objects can be created).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as c

DROP = object()  # marks a spec key to remove


def job(name: str = "train", **spec: Any) -> dict[str, Any]:
    """A minimal valid TrainingJob, with `spec` overrides (DROP removes a key)."""
    body = {"framework": "pytorch", "image": "registry.example/train:1", "command": ["python", "train.py"], **spec}
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name},
        "spec": {key: value for key, value in body.items() if value is not DROP},
    }


def create(kube: Kube, namespace: str, manifest: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
    extra = {"dry_run": "All"} if dry_run else {}
    return kube.custom.create_namespaced_custom_object(c.GROUP, c.VERSION, namespace, c.PLURAL, manifest, **extra)


def read(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return kube.custom.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, c.PLURAL, name)


def rejection(call: Any) -> str:
    """The API server's message for a call that must fail with 422 Unprocessable Entity."""
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return json.loads(caught.value.body)["message"]


def existing_claims(kube: Kube, namespace: str, *names: str) -> None:
    """PersistentVolumeClaims a job may name: the validating webhook refuses claims that do not exist."""
    for name in names:
        claim = {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        kube.core.create_namespaced_persistent_volume_claim(namespace, claim)


def ensure_priority_class(kube: Kube, name: str) -> None:
    """A PriorityClass a job may name: the validating webhook refuses one that does not exist."""
    from kubernetes import client

    try:
        client.SchedulingV1Api(kube.api).create_priority_class({"metadata": {"name": name}, "value": 1000})
    except ApiException as error:
        if error.status != 409:
            raise


def volumes(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "emptyDir": {}} for name in names]


def _serves_trainingjobs(kube: Kube) -> bool:
    try:
        create(kube, "default", job(), dry_run=True)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture(scope="module", autouse=True)
def served_crd(kube: Kube, trainingjob_crd: None) -> None:
    """The CRD from crd_manifest() (installed idempotently by the session fixture), once objects can be created:
    Established can precede the first successful create by a moment."""
    wait_until(lambda: _serves_trainingjobs(kube), 30, "TrainingJobs to be served")
