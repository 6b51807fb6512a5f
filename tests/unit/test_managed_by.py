"""spec.managedBy: who reconciles a job (api/managed_by.py), the schema that makes it immutable in every served
version, and the mutating webhook that adds no finalizer to another controller's job. The operator and the API
server acting on it: tests/integration/test_managed_by.py."""

from __future__ import annotations

import re

import pytest

from trainingjob.api import constants as c
from trainingjob.api.managed_by import DOMAIN_PREFIXED_PATH, MAX_LENGTH, managed_by, managed_here
from trainingjob.api.schema import crd_manifest
from trainingjob.webhooks.admission import AdmissionRequest
from trainingjob.webhooks.defaulting import finalizer_patch


def body(**spec: object) -> dict[str, object]:
    return {"metadata": {"name": "job"}, "spec": spec}


def test_a_job_naming_no_controller_or_this_operator_is_reconciled_here() -> None:
    assert managed_here(body()) and managed_here({"metadata": {}})
    assert managed_here(body(managedBy=c.CONTROLLER_NAME))
    assert c.CONTROLLER_NAME == "ml.example.com/trainingjob-operator"


@pytest.mark.parametrize("other", [c.MULTIKUEUE_CONTROLLER, "example.com/my-controller", "trainingjob-operator"])
def test_a_job_naming_another_controller_is_not(other: str) -> None:
    assert not managed_here(body(managedBy=other))
    assert managed_by(body(managedBy=other)) == other


def test_the_pattern_takes_controller_names_and_refuses_bare_names() -> None:
    for good in (c.CONTROLLER_NAME, c.MULTIKUEUE_CONTROLLER, "kubernetes.io/job-controller", "a.b/c/d"):
        assert re.match(DOMAIN_PREFIXED_PATH, good), good
    for bad in ("multikueue", "Example.com/x", "example.com/", "/x", "a b/c", "example.com/a b"):
        assert not re.match(DOMAIN_PREFIXED_PATH, bad), bad


def test_every_served_version_has_the_field_immutable() -> None:
    versions = crd_manifest()["spec"]["versions"]
    assert {v["name"] for v in versions} >= set(c.SERVED_VERSIONS)
    for version in versions:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        field = spec["properties"]["managedBy"]
        assert field["maxLength"] == MAX_LENGTH and field["pattern"] == DOMAIN_PREFIXED_PATH
        assert [r["rule"] for r in field["x-kubernetes-validations"]] == ["self == oldSelf"]
        assert "has(self.managedBy) == has(oldSelf.managedBy)" in [r["rule"] for r in spec["x-kubernetes-validations"]]
        assert c.MULTIKUEUE_CONTROLLER in field["description"]


def test_no_finalizer_for_a_job_another_controller_manages() -> None:
    def request(spec: dict[str, object]) -> AdmissionRequest:
        manifest = {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": {"name": "job"}, "spec": spec}
        return AdmissionRequest("uid-1", "CREATE", "ml", "job", manifest, None, version=c.VERSION)

    assert finalizer_patch(request({"managedBy": c.MULTIKUEUE_CONTROLLER})) == []
    assert finalizer_patch(request({"managedBy": c.CONTROLLER_NAME})) != []
    assert finalizer_patch(request({})) != []


def test_a_sweeps_template_may_name_only_this_operator() -> None:
    from trainingjob.api.schema_sweep import sweep_crd_manifest

    template = sweep_crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = template["properties"]["trialTemplate"]["properties"]["spec"]["x-kubernetes-validations"]
    assert any("self.managedBy ==" in r["rule"] and c.CONTROLLER_NAME in r["rule"] for r in rules)


def test_only_a_queued_job_multikueue_dispatches_gets_its_workload_here() -> None:
    """On a manager cluster the Workload is what MultiKueue dispatches: the Workload controller still makes it for
    a MultiKueue job labelled for a queue, and for no other controller's job."""
    from trainingjob.operator.kueue.reconciler import dispatched
    from trainingjob.queueing.workload import QUEUE_LABEL

    def job(managed: str | None, queue: str | None) -> dict[str, object]:
        labels = {QUEUE_LABEL: queue} if queue else {}
        return {"metadata": {"name": "j", "labels": labels}, "spec": {"managedBy": managed} if managed else {}}

    assert dispatched(job(c.MULTIKUEUE_CONTROLLER, "team"))
    assert not dispatched(job(c.MULTIKUEUE_CONTROLLER, None))
    assert not dispatched(job("example.com/other", "team"))
    assert not dispatched(job(None, "team"))  # ours: the whole job is reconciled, not just its Workload
