"""The admission webhooks on the real API server, as a user sees them through kubectl: what they refuse and what they
warn about, in both versions; that the operator's own writes never call them; and what still holds while the
operator (and so every webhook) is down."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterUnderTest
from tests.integration import api_support
from tests.integration.v1_support import apply, create, read, v1_job, wait_state
from tests.jobs import job_manifest, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator, start_again
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
VALIDATE = f'admission webhook "{w.VALIDATING_WEBHOOK}" denied the request: '
MUTATE = f'admission webhook "{w.MUTATING_WEBHOOK}" denied the request: '


def both_versions(name: str, **spec: Any) -> list[dict[str, Any]]:
    """The same job as v1 (the guide's way) and as v1alpha1 (the lab's way)."""
    return [v1_job(name, **spec), job_manifest(name, complete_after=None, **spec)]


def quota(kube: Kube, namespace: str, hard: dict[str, str]) -> None:
    kube.core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "team"}, "spec": {"hard": hard}})
    wait_until(
        lambda: (kube.core.read_namespaced_resource_quota("team", namespace).status.hard or {}) != {},
        30,
        "the quota controller to account the quota",
    )


def test_a_claim_that_does_not_exist_is_refused_in_both_versions(cluster: ClusterUnderTest, namespace: str) -> None:
    for manifest in both_versions("data", dataVolume={"claimName": "imagenet"}):
        outcome = apply(cluster, manifest, namespace)
        assert outcome.code == 1
        assert (
            f"{VALIDATE}spec.dataVolume.claimName: PersistentVolumeClaim imagenet does not exist in namespace "
            f"{namespace}; create it first (the workers would wait for it forever)"
        ) in outcome.err


def test_a_claim_not_bound_yet_is_accepted_with_a_warning(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    claim = {
        "metadata": {"name": "imagenet"},
        "spec": {
            "storageClassName": "provisioned-later",
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    kube.core.create_namespaced_persistent_volume_claim(namespace, claim)
    outcome = apply(cluster, v1_job("data", dataVolume={"claimName": "imagenet"}), namespace)
    assert outcome.code == 0, outcome.err
    assert (
        "spec.dataVolume.claimName: PersistentVolumeClaim imagenet is not bound yet (phase Pending)"
        in outcome.warnings[1]
    )


def test_a_priority_class_that_does_not_exist_is_refused(cluster: ClusterUnderTest, kube: Kube, namespace: str) -> None:
    name = f"urgent-{namespace}"  # PriorityClasses are cluster-wide: one of this test's own
    outcome = apply(cluster, v1_job("urgent", scheduling={"priorityClassName": name}), namespace)
    assert outcome.code == 1
    assert f"{VALIDATE}spec.scheduling.priorityClassName: PriorityClass {name} does not exist" in outcome.err
    api_support.ensure_priority_class(kube, name)
    try:
        assert apply(cluster, v1_job("urgent", scheduling={"priorityClassName": name}), namespace).code == 0
    finally:
        client.SchedulingV1Api(kube.api).delete_priority_class(name)


def test_a_gang_the_quota_can_never_hold_is_refused_and_one_that_must_wait_is_warned(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    quota(kube, namespace, {"requests.nvidia.com/gpu": "4"})
    refused = apply(cluster, v1_job("big", numWorkers=3, gpusPerWorker=2), namespace)
    assert refused.code == 1
    assert (
        f"{VALIDATE}ResourceQuota team allows requests.nvidia.com/gpu 4 in this namespace, and the gang of 3 workers "
        "needs 6: it could never start"
    ) in refused.err
    assert apply(cluster, v1_job("first", numWorkers=2, gpusPerWorker=2), namespace).code == 0
    wait_state(kube, namespace, "first", "Running")
    wait_until(
        lambda: (
            kube.core.read_namespaced_resource_quota("team", namespace).status.used.get("requests.nvidia.com/gpu")
            == "4"
        ),
        30,
        "the quota to count the first job's GPUs",
    )
    waits = apply(cluster, v1_job("second", numWorkers=1, gpusPerWorker=2), namespace)
    assert waits.code == 0
    assert "ResourceQuota team: 0 of 4 requests.nvidia.com/gpu free now and the gang needs 2" in waits.warnings[1]


def test_a_quota_on_cpu_needs_every_worker_to_ask_for_cpu(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    quota(kube, namespace, {"requests.cpu": "8"})
    refused = apply(cluster, v1_job("bare", gpusPerWorker=0), namespace)
    assert refused.code == 1 and "ResourceQuota team constrains requests.cpu, so every pod must set it" in refused.err
    assert apply(cluster, v1_job("sized", gpusPerWorker=0, resources={"requests": {"cpu": "1"}}), namespace).code == 0


def test_a_service_account_that_does_not_exist_yet_is_warned(cluster: ClusterUnderTest, namespace: str) -> None:
    outcome = apply(cluster, job_manifest("sa", complete_after=None, serviceAccountName="trainer"), namespace)
    assert outcome.code == 0 and outcome.warnings == [
        f"spec.serviceAccountName: ServiceAccount trainer does not exist in {namespace} yet; worker pods are refused "
        "until it does"
    ]


def test_a_model_that_makes_no_image_is_refused_and_a_new_model_with_the_old_image_warned(
    cluster: ClusterUnderTest, namespace: str
) -> None:
    refused = apply(cluster, v1_job("llama", model="meta-llama/Llama-2-7b"), namespace)
    assert refused.code == 1 and f"{MUTATE}spec.image is unset and cannot be derived from spec.model" in refused.err
    assert apply(cluster, v1_job("resnet"), namespace).code == 0
    changed = apply(cluster, v1_job("resnet", model="resnet101"), namespace)
    assert changed.code == 0
    assert changed.warnings == [
        "spec.model changed but spec.image is still training-image:resnet50, derived from the old model: set "
        "spec.image to run another image"
    ]


def test_a_server_side_dry_run_is_judged_and_defaulted_too(cluster: ClusterUnderTest, namespace: str) -> None:
    dry = apply(cluster, v1_job("dry", dataVolume={"claimName": "nope"}), namespace, "--dry-run=server")
    assert dry.code == 1 and "PersistentVolumeClaim nope does not exist" in dry.err
    outcome = apply(cluster, v1_job("dry"), namespace, "--dry-run=server", "-o", "jsonpath={.spec.image}")
    assert outcome.code == 0 and outcome.out == "training-image:resnet50"


def webhook_calls(kube: Kube) -> dict[tuple[str, str], float]:
    """apiserver_admission_webhook_request_total of our two webhooks, by (webhook, operation)."""
    text = kube.api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False)[0].data.decode()
    calls: dict[tuple[str, str], float] = {}
    pattern = re.compile(r"^apiserver_admission_webhook_request_total\{(.*)\} (\S+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if labels["name"] in (w.MUTATING_WEBHOOK, w.VALIDATING_WEBHOOK):
                key = (labels["name"], labels["operation"])
                calls[key] = calls.get(key, 0) + float(match.group(2))
    return calls


def test_the_operators_own_writes_never_call_the_webhooks(kube: Kube, namespace: str) -> None:
    """Status, children, the finalizer's removal: a job run to the end costs its create's two calls (the mutating
    one adds the finalizer), no more."""
    before = webhook_calls(kube)
    create(kube, namespace, job_manifest("quiet", workers=2, complete_after="1s"))
    wait_phase(kube, namespace, "quiet", "Succeeded")
    after = webhook_calls(kube)
    delta = {key: after.get(key, 0) - before.get(key, 0) for key in after}
    assert {key: value for key, value in delta.items() if value} == {
        (w.MUTATING_WEBHOOK, "CREATE"): 1,
        (w.VALIDATING_WEBHOOK, "CREATE"): 1,
    }


def job_events(kube: Kube, namespace: str, name: str, since: str) -> list[dict[str, Any]]:
    """Every stored version of a job after resourceVersion `since`, replayed from the API server's watch cache."""
    stream = watch.Watch().stream(
        kube.custom.list_namespaced_custom_object,
        c.GROUP,
        c.V1,
        namespace,
        c.PLURAL,
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=2,
    )
    return [event["object"] for event in stream if event["type"] == "MODIFIED"]


def test_a_new_job_is_stored_with_the_finalizer_and_the_operator_writes_only_its_status(
    kube: Kube, namespace: str
) -> None:
    """The mutating webhook adds the finalizer on create, so the operator spends no write of its own on it."""
    created = create(kube, namespace, job_manifest("sealed", workers=2, complete_after="1s"))
    assert created["metadata"]["finalizers"] == [c.FINALIZER]
    wait_phase(kube, namespace, "sealed", "Succeeded")
    versions = job_events(kube, namespace, "sealed", created["metadata"]["resourceVersion"])
    assert len(versions) >= 2, "the status writes up to Succeeded"
    kept = [(v["metadata"].get("finalizers"), v["metadata"]["generation"], v.get("spec")) for v in versions]
    assert kept == [([c.FINALIZER], 1, versions[0]["spec"])] * len(versions), "only the status changed after create"


def test_while_the_operator_is_down_jobs_stay_safe_and_v1_stays_readable(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    create(kube, namespace, job_manifest("before", complete_after=None))
    wait_state(kube, namespace, "before", "Running")
    operator.stop(hard=True)
    try:
        # The storage version needs no webhook: the operator's own watch (and tj) keep working.
        assert read(kube, namespace, "before", c.V1)["status"]["state"] == "Running"
        with pytest.raises(ApiException) as conversion:
            read(kube, namespace, "before", c.V1ALPHA1)
        assert conversion.value.status == 500 and "conversion webhook" in conversion.value.body
        # The mutating webhook fails closed (it stamps what it admits): creates and spec changes wait for the
        # operator, with a message naming the webhook; writes of metadata alone call no webhook.
        for call in (
            lambda: create(kube, namespace, v1_job("unchecked", image="registry.example/train:1")),
            lambda: kube.custom.patch_namespaced_custom_object(
                c.GROUP, c.V1, namespace, c.PLURAL, "before", {"spec": {"suspend": True}}
            ),
        ):
            with pytest.raises(ApiException) as refused:
                call()
            assert refused.value.status >= 500, refused.value.body
            message = json.loads(refused.value.body)["message"]
            assert f'failed calling webhook "{w.MUTATING_WEBHOOK}"' in message, message
        labelled = {"metadata": {"labels": {"team": "a"}}}
        kube.custom.patch_namespaced_custom_object(c.GROUP, c.V1, namespace, c.PLURAL, "before", labelled)
    finally:
        start_again(operator)
    wait_until(lambda: read(kube, namespace, "before", c.V1ALPHA1) is not None, 30, "v1alpha1 to be served again")
    assert read(kube, namespace, "unchecked", c.V1) is None
    pods = client.CoreV1Api(kube.api).list_namespaced_pod(namespace, label_selector=f"{c.LABEL_JOB_NAME}=before").items
    assert [p.metadata.name for p in pods] == ["before-worker-0"], "nothing was lost or duplicated meanwhile"
