"""The real API server on updates of an existing TrainingJob: the framework is immutable, other fields stay
mutable, and the scale subresource sets spec.workers within its limit."""

from __future__ import annotations

import pytest

from tests.integration import api_support
from tests.integration.api_support import create, job, read, rejection
from tests.kube import Kube
from trainingjob.api import constants as c

pytestmark = pytest.mark.integration

served_crd = api_support.served_crd  # autouse: each test here runs once TrainingJobs are served

# --- updates -------------------------------------------------------------------------------------------------------


def test_framework_is_immutable(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job())
    message = rejection(
        lambda: kube.custom.patch_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, c.PLURAL, "train", {"spec": {"framework": "jax"}}
        )
    )
    assert "spec.framework" in message
    assert "framework is immutable; create a new TrainingJob to change it" in message


def test_other_fields_stay_mutable(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job())
    kube.custom.patch_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, c.PLURAL, "train", {"spec": {"image": "registry.example/train:2"}}
    )
    assert read(kube, namespace, "train")["spec"]["image"] == "registry.example/train:2"


def test_scale_subresource_sets_workers(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job())
    kube.custom.patch_namespaced_custom_object_scale(
        c.GROUP, c.VERSION, namespace, c.PLURAL, "train", {"spec": {"replicas": 4}}
    )
    assert read(kube, namespace, "train")["spec"]["workers"] == 4
    scale = kube.custom.get_namespaced_custom_object_scale(c.GROUP, c.VERSION, namespace, c.PLURAL, "train")
    assert scale["spec"]["replicas"] == 4


def test_scale_beyond_the_limit_is_rejected(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job())
    message = rejection(
        lambda: kube.custom.patch_namespaced_custom_object_scale(
            c.GROUP, c.VERSION, namespace, c.PLURAL, "train", {"spec": {"replicas": c.MAX_WORKERS + 1}}
        )
    )
    assert "spec.workers" in message
