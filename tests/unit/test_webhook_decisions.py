"""The webhooks' decisions as pure functions: AdmissionReview and ConversionReview on the wire, the image default,
and the validating checks over a cluster view given as data. What the real API server makes of them is in
tests/integration/test_webhooks.py."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from trainingjob.api import constants as c
from trainingjob.api.conversion_review import conversion_review
from trainingjob.config import OperatorConfig
from trainingjob.webhooks.admission import AdmissionRequest, Verdict, parse_review, review_response
from trainingjob.webhooks.defaulting import IMAGE_REFERENCE, default_image
from trainingjob.webhooks.validation import validate

PATTERN = c.DEFAULT_IMAGE_PATTERN


def request(spec: dict[str, Any], old: dict[str, Any] | None = None, version: str = c.V1) -> AdmissionRequest:
    def body(s: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{c.GROUP}/{version}", "kind": c.KIND, "metadata": {"name": "job"}, "spec": s}

    return AdmissionRequest(
        "uid-1", "UPDATE" if old is not None else "CREATE", "ml", "job", body(spec), body(old) if old else None
    )


# --- AdmissionReview and ConversionReview ------------------------------------------------------------------------


def test_a_review_answer_carries_the_patch_warnings_and_denial() -> None:
    allowed = Verdict(warnings=["w"], patch=[{"op": "add", "path": "/spec/image", "value": "i"}])
    response = review_response("u", allowed)["response"]
    assert response["allowed"] is True and response["warnings"] == ["w"] and response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == allowed.patch
    denied = review_response("u", Verdict().deny("first").deny("second"))["response"]
    assert denied["allowed"] is False and "patch" not in denied
    assert denied["status"] == {"code": 403, "reason": "Forbidden", "message": "first; second"}


def test_a_body_that_is_no_admission_review_is_refused() -> None:
    for body in (None, {}, {"request": {"uid": "u"}}, {"request": {"object": {}}}):
        with pytest.raises(ValueError):
            parse_review(body)
    review = parse_review({"request": {"uid": "u", "operation": "CREATE", "namespace": "ml", "object": {"spec": {}}}})
    assert (review.uid, review.namespace, review.old_object) == ("u", "ml", None)


def test_a_conversion_review_converts_every_object_or_fails_as_a_whole() -> None:
    job = {"apiVersion": f"{c.GROUP}/{c.V1}", "kind": c.KIND, "metadata": {"name": "a"}, "spec": {"numWorkers": 2}}
    answer = conversion_review(
        {"request": {"uid": "u", "desiredAPIVersion": f"{c.GROUP}/{c.V1ALPHA1}", "objects": [job]}}
    )
    response = answer["response"]
    assert answer["kind"] == "ConversionReview" and response["uid"] == "u"
    assert response["result"] == {"status": "Success"}
    assert response["convertedObjects"][0]["spec"]["workers"] == 2
    other = {**job, "metadata": {"name": "b", "namespace": "team"}}
    failed = conversion_review({"request": {"uid": "u", "desiredAPIVersion": f"{c.GROUP}/v9", "objects": [other, job]}})
    assert failed["response"]["result"]["status"] == "Failure" and failed["response"]["convertedObjects"] == []
    assert failed["response"]["result"]["message"].startswith(f"cannot convert team/b to {c.GROUP}/v9: ")


# --- the image default ---------------------------------------------------------------------------------------------


def test_a_v1_job_without_image_gets_one_from_its_model_and_is_told() -> None:
    verdict = default_image(request({"model": "resnet50", "framework": "pytorch"}), PATTERN)
    assert verdict.allowed and verdict.patch == [
        {"op": "add", "path": "/spec/image", "value": "training-image:resnet50"}
    ]
    assert verdict.warnings == [
        "spec.image set to training-image:resnet50, derived from spec.model by the operator's --default-image"
    ]
    framework = default_image(request({"model": "bert", "framework": "jax"}), "registry.example/{framework}-{model}:1")
    assert framework.patch[0]["value"] == "registry.example/jax-bert:1"


@pytest.mark.parametrize(
    ("spec", "pattern"), [({"model": "resnet50", "image": "mine:1"}, PATTERN), ({}, PATTERN), ({"model": "m"}, None)]
)
def test_nothing_is_derived_without_need_or_means(spec: dict[str, Any], pattern: str | None) -> None:
    verdict = default_image(request(spec), pattern)
    assert verdict.allowed and verdict.patch == [] and verdict.warnings == []


def test_a_model_that_makes_no_image_reference_is_refused_with_the_reason() -> None:
    verdict = default_image(request({"model": "meta-llama/Llama 2"}), PATTERN)
    assert not verdict.allowed
    assert "'training-image:meta-llama/Llama 2' (the operator's --default-image 'training-image:{model}')" in (
        verdict.message or ""
    )


def test_a_replace_without_the_image_keeps_the_one_the_job_runs() -> None:
    verdict = default_image(request({"model": "b"}, old={"model": "a", "image": "training-image:a"}), PATTERN)
    assert verdict.patch == [{"op": "add", "path": "/spec/image", "value": "training-image:a"}]
    assert "kept training-image:a" in verdict.warnings[0]


@pytest.mark.parametrize(
    "reference", ["training-image:resnet50", "registry.example:5000/ml/train:1.2", "busybox", "a/b@sha256:" + "0" * 64]
)
def test_image_references(reference: str) -> None:
    assert IMAGE_REFERENCE.match(reference)


@pytest.mark.parametrize("reference", ["training-image:a/b", "UPPER:1", "x:", ":tag", "a b"])
def test_not_image_references(reference: str) -> None:
    assert not IMAGE_REFERENCE.match(reference)


# --- the validating checks over a given cluster --------------------------------------------------------------------


class Cluster:
    """validation.ClusterView over plain data."""

    def __init__(self, **objects: Any) -> None:
        self.objects = objects
        self.limit_range_reads = 0

    async def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get("claims", {}).get(name)

    async def priority_class(self, name: str) -> dict[str, Any] | None:
        return self.objects.get("priority_classes", {}).get(name)

    async def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get("service_accounts", {}).get(name)

    async def quotas(self, namespace: str) -> list[dict[str, Any]]:
        return self.objects.get("quotas", [])

    async def limit_ranges(self, namespace: str) -> list[dict[str, Any]]:
        self.limit_range_reads += 1
        return self.objects.get("limit_ranges", [])


def judged(cluster: Cluster, spec: dict[str, Any], old: dict[str, Any] | None = None, version: str = c.V1) -> Verdict:
    full = {"framework": "pytorch", "image": "train:1", **spec}
    previous = {"framework": "pytorch", "image": "train:1", **old} if old is not None else None
    return asyncio.run(validate(request(full, previous, version), cluster, OperatorConfig(), PATTERN))


def claim(phase: str, modes: tuple[str, ...] = ("ReadWriteMany",)) -> dict[str, Any]:
    return {"spec": {"accessModes": list(modes)}, "status": {"phase": phase}}


def quota(name: str, hard: dict[str, Any], used: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"hard": hard, **spec}, "status": {"used": used or {}}}


def test_a_missing_or_lost_claim_is_refused_and_an_unbound_one_warned() -> None:
    missing = judged(Cluster(), {"dataVolume": {"claimName": "imagenet"}})
    assert not missing.allowed and "PersistentVolumeClaim imagenet does not exist in namespace ml" in missing.message
    lost = judged(Cluster(claims={"imagenet": claim("Lost")}), {"dataVolume": {"claimName": "imagenet"}})
    assert not lost.allowed and "is Lost" in lost.message
    pending = judged(Cluster(claims={"imagenet": claim("Pending")}), {"dataVolume": {"claimName": "imagenet"}})
    assert pending.allowed and "PersistentVolumeClaim imagenet is not bound yet (phase Pending)" in pending.warnings[0]


def test_a_checkpoint_claim_is_checked_too_and_only_when_it_changes() -> None:
    spec = {"checkpoint": {"enabled": True, "storage": {"claimName": "ckpt"}}}
    assert "spec.checkpoint.storage.claimName" in (judged(Cluster(), spec).message or "")
    assert judged(Cluster(), spec, old=spec).allowed, "an unchanged claim is not judged again"


def test_read_write_once_claims_are_warned_for_several_writers() -> None:
    cluster = Cluster(claims={"ckpt": claim("Bound", ("ReadWriteOnce",))})
    verdict = judged(cluster, {"numWorkers": 3, "checkpoint": {"storage": {"claimName": "ckpt"}}})
    assert verdict.allowed and "3 workers can only all mount it when they share one node" in verdict.warnings[0]
    read_only = judged(cluster, {"numWorkers": 3, "dataVolume": {"claimName": "ckpt"}})
    assert read_only.warnings == [], "data mounted read-only is fine on any number of nodes"


def test_a_missing_priority_class_is_refused_and_a_missing_service_account_warned() -> None:
    verdict = judged(Cluster(), {"scheduling": {"priorityClassName": "high"}, "serviceAccountName": "trainer"})
    assert not verdict.allowed and "PriorityClass high does not exist" in verdict.message
    assert "ServiceAccount trainer does not exist in ml yet" in verdict.warnings[0]
    ok = Cluster(priority_classes={"high": {}}, service_accounts={"trainer": {}})
    assert judged(ok, {"scheduling": {"priorityClassName": "high"}, "serviceAccountName": "trainer"}) == Verdict()


def test_a_gang_no_quota_can_hold_is_refused_and_one_that_must_wait_is_warned() -> None:
    gpus = quota("gpus", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "6"})
    never = judged(Cluster(quotas=[gpus]), {"numWorkers": 4, "gpusPerWorker": 4})
    assert not never.allowed
    assert never.message == (
        "ResourceQuota gpus allows requests.nvidia.com/gpu 8 in this namespace, and the gang of 4 workers needs 16: "
        "it could never start; use fewer workers or smaller ones, or raise the quota"
    )
    waits = judged(Cluster(quotas=[gpus]), {"numWorkers": 2, "gpusPerWorker": 2})
    assert waits.allowed and waits.warnings == [
        "ResourceQuota gpus: 2 of 8 requests.nvidia.com/gpu free now and the gang needs 4; the workers are created "
        "once enough is free"
    ]
    assert judged(Cluster(quotas=[gpus]), {"numWorkers": 2, "gpusPerWorker": 2}, old={"numWorkers": 2}).warnings == []


def test_a_quota_on_cpu_needs_every_worker_to_request_it_unless_a_limit_range_defaults_it() -> None:
    cpu = quota("compute", {"requests.cpu": "64", "pods": "10"})
    verdict = judged(Cluster(quotas=[cpu]), {"numWorkers": 2, "gpusPerWorker": 0})
    assert not verdict.allowed and "set spec.resources.requests.cpu" in verdict.message
    defaults = [{"spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m"}}]}}]
    assert judged(Cluster(quotas=[cpu], limit_ranges=defaults), {"numWorkers": 2, "gpusPerWorker": 0}).allowed
    too_many = judged(Cluster(quotas=[cpu]), {"numWorkers": 11, "resources": {"requests": {"cpu": "1"}}})
    assert "ResourceQuota compute allows pods 10" in (too_many.message or "")


def test_limit_ranges_are_read_only_where_a_quota_counts_their_defaults() -> None:
    without_quotas = Cluster(limit_ranges=[{"spec": {"limits": []}}])
    assert judged(without_quotas, {"numWorkers": 2}).allowed
    assert getattr(without_quotas, "limit_range_reads", 0) == 0, "no quota: admission lists no LimitRanges"
    with_quota = Cluster(quotas=[quota("pods", {"pods": "10"})])
    assert judged(with_quota, {"numWorkers": 2}).allowed
    assert with_quota.limit_range_reads == 1


def test_a_scoped_quota_counts_only_the_pods_it_selects() -> None:
    scoped = quota(
        "high-gpus",
        {"requests.nvidia.com/gpu": "2"},
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]},
    )
    cluster = Cluster(quotas=[scoped], priority_classes={"high": {}})
    assert judged(cluster, {"numWorkers": 2, "gpusPerWorker": 2}).allowed
    assert not judged(
        cluster, {"numWorkers": 2, "gpusPerWorker": 2, "scheduling": {"priorityClassName": "high"}}
    ).allowed


def test_v1alpha1_jobs_are_judged_alike() -> None:
    verdict = judged(Cluster(), {"command": ["x"], "dataVolume": {"claimName": "d"}}, version=c.V1ALPHA1)
    assert not verdict.allowed and "PersistentVolumeClaim d does not exist" in verdict.message


def test_a_new_model_with_the_image_of_the_old_one_is_warned() -> None:
    old = {"model": "resnet50", "image": "training-image:resnet50"}
    verdict = judged(Cluster(), {"model": "resnet101", "image": "training-image:resnet50"}, old=old)
    assert (
        verdict.allowed and "spec.model changed but spec.image is still training-image:resnet50" in verdict.warnings[0]
    )
    chosen = judged(Cluster(), {"model": "resnet101", "image": "mine:2"}, old={"model": "resnet50", "image": "mine:1"})
    assert chosen.warnings == []


class QuotaListings:
    """CoreV1Api's list_namespaced_resource_quota as the API server answers it, counting the calls."""

    def __init__(self) -> None:
        self.items: dict[str, list[dict]] = {}
        self.calls = 0

    async def list_namespaced_resource_quota(self, namespace: str, **options: object) -> object:
        self.calls += 1
        body = json.dumps({"items": self.items.get(namespace, [])}).encode()

        class Response:
            status = 200

            async def read(self) -> bytes:
                return body

        return Response()


def test_a_namespace_without_quotas_is_listed_once_per_ttl_and_one_with_quotas_every_time() -> None:
    """A burst of jobs into a namespace with no ResourceQuota cost one LIST each; `used` of a real quota must be
    fresh for the warning of a job that must wait."""
    from kubernetes_asyncio import client

    from trainingjob.scheduling.quota import QUOTA_TTL
    from trainingjob.webhooks.component import ApiClusterView

    now = [100.0]
    listings = QuotaListings()

    async def admit(times: int) -> list[list[dict]]:
        async with client.ApiClient() as api:
            view = ApiClusterView(api, clock=lambda: now[0])
            view.core = listings
            first = [await view.quotas("ml") for _ in range(times)]
            now[0] += QUOTA_TTL
            listings.items["ml"] = [{"metadata": {"name": "team"}}]
            return first + [await view.quotas("ml") for _ in range(3)]

    answers = asyncio.run(admit(50))
    assert answers[:50] == [[]] * 50 and answers[50:] == [[{"metadata": {"name": "team"}}]] * 3
    assert listings.calls == 1 + 3


class SlowCluster(Cluster):
    """An API server that does not answer the lookup in time (what a loaded one did at 1000 x 8)."""

    async def priority_class(self, name: str) -> dict[str, Any] | None:
        raise TimeoutError


def test_a_lookup_that_times_out_is_skipped_and_the_log_says_why(caplog: pytest.LogCaptureFixture) -> None:
    """A TimeoutError's str() is empty: the warning read 'a validation lookup failed, skipped: ' with no cause."""
    verdict = judged(SlowCluster(), {"scheduling": {"priorityClassName": "high"}})
    assert verdict.allowed
    assert "a validation lookup failed, skipped: TimeoutError" in caplog.text
