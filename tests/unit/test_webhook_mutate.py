"""The mutating webhook's answer as a whole: the operator's finalizer on a new job (any version) and the v1 image
default, combined in one patch. The API server's side (matchConditions, the patch applied) is in
tests/integration/test_webhooks.py."""

from __future__ import annotations

from typing import Any

from trainingjob.api import constants as c
from trainingjob.api import webhook_config
from trainingjob.webhooks.admission import AdmissionRequest, parse_review
from trainingjob.webhooks.defaulting import finalizer_patch, mutate

PATTERN = c.DEFAULT_IMAGE_PATTERN
ADD_FINALIZER = {"op": "add", "path": "/metadata/finalizers", "value": [c.FINALIZER]}


def request(
    spec: dict[str, Any],
    version: str = c.V1,
    operation: str = "CREATE",
    finalizers: list[str] | None = None,
) -> AdmissionRequest:
    metadata: dict[str, Any] = {"name": "job"}
    if finalizers is not None:
        metadata["finalizers"] = finalizers
    body = {"apiVersion": f"{c.GROUP}/{version}", "kind": c.KIND, "metadata": metadata, "spec": spec}
    old = dict(body) if operation == "UPDATE" else None
    return AdmissionRequest("uid-1", operation, "ml", "job", body, old, version=version)


def test_a_new_job_gets_the_finalizer_in_any_version() -> None:
    for version in c.SERVED_VERSIONS:
        verdict = mutate(request({"image": "i:1"}, version=version), PATTERN)
        assert verdict.allowed and verdict.patch == [ADD_FINALIZER] and verdict.warnings == []


def test_the_finalizer_is_appended_to_others_and_never_twice() -> None:
    assert finalizer_patch(request({}, finalizers=["example.com/keep"])) == [
        {"op": "add", "path": "/metadata/finalizers/-", "value": c.FINALIZER}
    ]
    assert finalizer_patch(request({}, finalizers=[])) == [ADD_FINALIZER]
    assert finalizer_patch(request({}, finalizers=[c.FINALIZER])) == []


def test_an_update_never_adds_the_finalizer() -> None:
    """A live job without it had it removed (being deleted, or on purpose): the operator decides, not admission."""
    assert finalizer_patch(request({"image": "i:1"}, operation="UPDATE")) == []


def test_a_v1_job_without_image_gets_the_image_and_the_finalizer_in_one_patch() -> None:
    verdict = mutate(request({"model": "resnet50"}), PATTERN)
    assert verdict.patch == [{"op": "add", "path": "/spec/image", "value": "training-image:resnet50"}, ADD_FINALIZER]
    assert verdict.warnings and "derived from spec.model" in verdict.warnings[0]


def test_an_image_is_derived_for_v1_only() -> None:
    """v1alpha1 requires spec.image in its schema: the webhook does not make up one for it."""
    verdict = mutate(request({"model": "resnet50"}, version=c.V1ALPHA1), PATTERN)
    assert verdict.patch == [ADD_FINALIZER] and verdict.warnings == []


def test_a_refused_image_default_adds_nothing() -> None:
    verdict = mutate(request({"model": "meta-llama/Llama 2"}), PATTERN)
    assert not verdict.allowed and verdict.patch == []


def test_the_request_version_is_read_from_the_review() -> None:
    review = {
        "request": {
            "uid": "u",
            "operation": "CREATE",
            "kind": {"group": c.GROUP, "version": c.V1ALPHA1, "kind": c.KIND},
            "object": {"metadata": {"name": "a"}, "spec": {}},
        }
    }
    assert parse_review(review).version == c.V1ALPHA1


def test_the_webhook_is_called_for_every_version_on_creates_spec_or_stamp_changes_and_missing_images() -> None:
    """Every create (the finalizer, and the admission stamp: reconcile/admission.py), every update of the spec or
    of the stamp (checked again), and v1 requests without an image; never the operator's own writes."""
    webhook = webhook_config.mutating_configuration()["webhooks"][0]
    assert webhook["rules"][0]["apiVersions"] == ["*"] and webhook["reinvocationPolicy"] == "IfNeeded"
    expression = webhook["matchConditions"][0]["expression"]
    assert expression.startswith("request.operation == 'CREATE' || (request.operation == 'UPDATE' && (")
    assert "object.spec != oldObject.spec" in expression and f"'{c.ADMISSION_ANNOTATION}'" in expression
    assert f"request.kind.version == '{c.V1}'" in expression
