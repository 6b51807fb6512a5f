"""spec.managedBy on the real API server and operator: a job another controller manages (MultiKueue's, on a
manager cluster) gets nothing from this operator — no finalizer, no pods, no Service, no ConfigMap, no status, no
Event — while a job that names this operator, or none, runs; the field cannot change once the job exists."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api_support import rejection
from tests.jobs import create_job, delete_job, get_job, job_manifest, job_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def owned_by(items: list[Any], uid: str) -> list[str]:
    return [i.metadata.name for i in items if any(o.uid == uid for o in i.metadata.owner_references or [])]


def test_a_job_managed_by_another_controller_is_left_alone(kube: Kube, namespace: str) -> None:
    elsewhere = create_job(
        kube, namespace, job_manifest("elsewhere", workers=2, complete_after=None, managedBy=k.MULTIKUEUE_CONTROLLER)
    )
    create_job(kube, namespace, job_manifest("here", managedBy=k.CONTROLLER_NAME))
    create_job(kube, namespace, job_manifest("unset"))
    # The operator is at work: the jobs it manages, one naming it and one naming no controller, run to the end.
    wait_phase(kube, namespace, "here", "Succeeded")
    wait_phase(kube, namespace, "unset", "Succeeded")
    # A change to the foreign job's spec is no reason to act on it either.
    patch_job(kube, namespace, "elsewhere", {"spec": {"workers": 3}})
    wait_phase(kube, namespace, "unset", "Succeeded")

    body = get_job(kube, namespace, "elsewhere") or {}
    uid = elsewhere["metadata"]["uid"]
    assert body.get("status") in (None, {}), body.get("status")
    assert k.FINALIZER not in (body["metadata"].get("finalizers") or [])
    assert job_pods(kube, namespace, "elsewhere") == []
    assert owned_by(kube.core.list_namespaced_service(namespace).items, uid) == []
    assert owned_by(kube.core.list_namespaced_config_map(namespace).items, uid) == []
    assert owned_by(kube.core.list_namespaced_persistent_volume_claim(namespace).items, uid) == []
    events = kube.core.list_namespaced_event(namespace, field_selector="involvedObject.name=elsewhere").items
    assert [(e.reason, e.message) for e in events] == []
    # No finalizer of ours: it goes at once, with or without the operator.
    delete_job(kube, namespace, "elsewhere")
    wait_until(lambda: get_job(kube, namespace, "elsewhere") is None, 60, "the foreign job to be gone")


def test_managed_by_cannot_change_be_added_or_removed(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("foreign", managedBy=k.MULTIKUEUE_CONTROLLER))
    create_job(kube, namespace, job_manifest("ours"))
    changed = rejection(lambda: patch_job(kube, namespace, "foreign", {"spec": {"managedBy": k.CONTROLLER_NAME}}))
    assert "managedBy is immutable; create a new TrainingJob for another controller" in changed
    removed = rejection(lambda: patch_job(kube, namespace, "foreign", {"spec": {"managedBy": None}}))
    added = rejection(lambda: patch_job(kube, namespace, "ours", {"spec": {"managedBy": k.MULTIKUEUE_CONTROLLER}}))
    for message in (removed, added):
        assert "managedBy cannot be added or removed" in message


@pytest.mark.parametrize("value", ["multikueue", "Example.com/x", "example.com/", "example.com/" + "x" * 60])
def test_managed_by_is_a_domain_prefixed_path_of_at_most_63_characters(kube: Kube, namespace: str, value: str) -> None:
    message = rejection(lambda: create_job(kube, namespace, job_manifest("bad", managedBy=value)))
    assert "spec.managedBy" in message


def test_a_sweeps_trials_are_this_operators(kube: Kube, namespace: str) -> None:
    """A sweep reads its trials' results from the status this operator writes: a trial managed elsewhere would
    leave it waiting forever, so its template may name no other controller."""
    from tests.integration.sweep_helpers import create_sweep, refusal, sweep_manifest

    template = job_manifest("t")["spec"]
    message = refusal(kube, namespace, sweep_manifest("away", {**template, "managedBy": k.MULTIKUEUE_CONTROLLER}))
    assert f"managedBy may only be {k.CONTROLLER_NAME}" in message
    create_sweep(kube, namespace, sweep_manifest("ours", {**template, "managedBy": k.CONTROLLER_NAME}, maxTrials=1))
