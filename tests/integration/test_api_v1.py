"""TrainingJob v1 on the real API server: the guide's manifests apply unchanged and run, objects round-trip between
the versions through the conversion webhook without loss, v1's defaults, checkpoint storage in object stores, and
the changes a running job cannot honour are refused (CEL transition rules)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.conftest import ClusterUnderTest
from tests.integration import api_support
from tests.integration.v1_support import (
    MANIFESTS,
    V1,
    apply,
    create,
    kubectl,
    read,
    release,
    v1_job,
    wait_state,
    without_server_fields,
)
from tests.jobs import job_manifest, live_pods
from tests.kube import Kube
from trainingjob.api import constants as c
from trainingjob.api.conversion import convert

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]


def env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env if e.value is not None}


@pytest.mark.parametrize("manifest", ["guide-test-basic-operator.yaml", "guide-test-integration.yaml"])
def test_the_guides_job_applies_unchanged_and_runs(cluster: ClusterUnderTest, kube: Kube, manifest: str) -> None:
    path = MANIFESTS / manifest
    document = yaml.safe_load(path.read_text())
    name, namespace, spec = document["metadata"]["name"], document["metadata"]["namespace"], document["spec"]
    release(kube, namespace, name)  # the guide's namespace is `default`: start from nothing there
    try:
        applied = kubectl(cluster, "apply", "-f", str(path))
        assert applied.code == 0, applied.err
        image = f"training-image:{spec['model']}"
        assert applied.warnings == [
            f"spec.image set to {image}, derived from spec.model by the operator's --default-image"
        ]
        wait_state(kube, namespace, name, "Running")
        pods = live_pods(kube, namespace, name)
        assert len(pods) == spec["numWorkers"]
        for pod in pods:
            container = pod.spec.containers[0]
            assert container.image == image
            assert container.resources.limits["nvidia.com/gpu"] == str(spec["gpusPerWorker"])
            env = env_of(pod)
            assert (env["MODEL"], env["DATASET"], env["WORLD_SIZE"]) == (spec["model"], spec["dataset"], "2")
            assert env["HYPERPARAM_LEARNING_RATE"] == str(spec["hyperparameters"]["learningRate"])
            assert env["HYPERPARAM_BATCH_SIZE"] == str(spec["hyperparameters"]["batchSize"])
        # What the guide then runs: `kubectl get trainingjob` shows its columns, describe works.
        table = kubectl(cluster, "get", "trainingjob", name, "-n", namespace).out.split()
        assert table[:6] == ["NAME", "STATE", "PROGRESS", "EPOCH", "WORKERS", "AGE"] and table[7:9] == ["Running", "2"]
        assert kubectl(cluster, "describe", "trainingjob", name, "-n", namespace).code == 0
        old = read(kube, namespace, name, c.V1ALPHA1)
        assert (old["spec"]["workers"], old["spec"]["gpuPerWorker"], old["spec"]["framework"]) == (2, 1, "pytorch")
        assert old["status"]["phase"] == "Running"
    finally:
        release(kube, namespace, name)


def rich_v1alpha1_job() -> dict[str, Any]:
    return job_manifest(
        "rich",
        workers=3,
        gpuPerWorker=2,
        model="bert",
        hyperparameters={"lr": 3e-4, "amp": True, "name": "x"},
        checkpointInterval=3,
        checkpoint={"enabled": True, "interval": 2, "keepLast": 4, "storage": {"size": "1Gi"}},
        dataVolume={"claimName": "data", "readOnly": False},
        env=[{"name": "LOG_LEVEL", "value": "debug"}],
        resources={"requests": {"cpu": "500m"}},
        failurePolicy={"rules": [{"exitCodes": [3], "action": "Fail"}]},
        networking={"masterPort": 23456},
        complete_after=None,
    )


def test_a_v1alpha1_job_reads_through_v1_and_writes_back_without_loss(kube: Kube, namespace: str) -> None:
    api_support.existing_claims(kube, namespace, "data")
    create(kube, namespace, rich_v1alpha1_job())
    wait_state(kube, namespace, "rich", "Running")
    before = read(kube, namespace, "rich", c.V1ALPHA1)
    through_v1 = read(kube, namespace, "rich", c.V1)
    assert without_server_fields(through_v1) == without_server_fields(convert(before, V1))
    assert through_v1["spec"]["numWorkers"] == 3 and through_v1["spec"]["checkpoint"]["frequency"] == 2
    assert through_v1["status"]["state"] == "Running"
    # Written back through v1 (labels added), read again through v1alpha1: everything else is as it was.
    through_v1["metadata"].setdefault("labels", {})["round"] = "trip"
    kube.custom.replace_namespaced_custom_object(c.GROUP, c.V1, namespace, c.PLURAL, "rich", through_v1)
    after = read(kube, namespace, "rich", c.V1ALPHA1)
    assert after["metadata"]["labels"] == {"round": "trip"}
    del after["metadata"]["labels"]
    assert without_server_fields(after) == without_server_fields(before)
    assert after["metadata"]["generation"] == before["metadata"]["generation"], "the spec did not change"


def test_a_v1_job_reads_through_v1alpha1_and_writes_back_without_loss(kube: Kube, namespace: str) -> None:
    manifest = v1_job(
        "guide", numWorkers=2, checkpoint={"frequency": 5, "storage": {"type": "gcs", "path": "gs://bucket/p"}}
    )
    create(kube, namespace, manifest)
    wait_state(kube, namespace, "guide", "Running")
    before = read(kube, namespace, "guide", c.V1)
    through_alpha = read(kube, namespace, "guide", c.V1ALPHA1)
    assert through_alpha["spec"]["workers"] == 2 and through_alpha["spec"]["checkpoint"]["interval"] == 5
    through_alpha["metadata"].setdefault("annotations", {})["round"] = "trip"
    kube.custom.replace_namespaced_custom_object(c.GROUP, c.V1ALPHA1, namespace, c.PLURAL, "guide", through_alpha)
    after = read(kube, namespace, "guide", c.V1)
    assert after["metadata"]["annotations"].pop("round") == "trip"
    assert after["spec"] == before["spec"] and after["status"]["state"] == before["status"]["state"]


def test_v1_defaults_the_guides_way(kube: Kube, namespace: str) -> None:
    created = create(
        kube, namespace, {"apiVersion": V1, "kind": c.KIND, "metadata": {"name": "m"}, "spec": {"model": "vit"}}
    )
    spec = created["spec"]
    assert (spec["numWorkers"], spec["gpusPerWorker"], spec["framework"], spec["image"]) == (
        1,
        1,
        "pytorch",
        "training-image:vit",
    )
    assert "command" not in spec, "no command: the image's own entrypoint runs"
    refused = api_support.rejection(lambda: create(kube, namespace, v1_job("c", checkpoint={"frequency": 2})))
    assert "checkpoint.enabled needs checkpoint.storage" in refused and "enabled is true unless set to false" in refused


def test_an_object_store_is_passed_to_the_workers_and_only_scratch_space_is_mounted(kube: Kube, namespace: str) -> None:
    checkpoint = {"frequency": 2, "storage": {"type": "s3", "path": "s3://models/resnet"}}
    create(kube, namespace, v1_job("s3", numWorkers=2, checkpoint=checkpoint))
    wait_state(kube, namespace, "s3", "Running")
    for pod in live_pods(kube, namespace, "s3"):
        env = env_of(pod)
        run = pod.metadata.owner_references[0].uid  # checkpoints belong to a run: <path>/<job uid>
        assert (env["CHECKPOINT_URI"], env["CHECKPOINT_INTERVAL"]) == (f"s3://models/resnet/{run}", "2")
        [scratch] = [v for v in pod.spec.volumes if v.name == "checkpoints"]
        assert scratch.empty_dir is not None and scratch.persistent_volume_claim is None
    assert kube.core.list_namespaced_persistent_volume_claim(namespace).items == []


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        ({"type": "s3"}, "type s3 needs path s3://<bucket>/<prefix>"),
        ({"type": "s3", "path": "gs://bucket/p"}, "type s3 needs path s3://<bucket>/<prefix>"),
        ({"type": "gcs", "path": "gs://bucket/p", "size": "1Gi"}, "do not go with type s3 or gcs"),
        ({"type": "pvc", "size": "1Gi", "path": "s3://bucket/p"}, "a pvc is mounted at checkpoint.dir instead"),
        ({"claimName": "x", "size": "1Gi"}, "exactly one of claimName (an existing PVC) and size"),
    ],
)
def test_checkpoint_storage_is_refused_in_words_in_both_versions(
    kube: Kube, namespace: str, storage: dict, message: str
) -> None:
    for manifest in (
        v1_job("bad", checkpoint={"storage": storage}),
        job_manifest("bad", checkpoint={"enabled": True, "storage": storage}),
    ):
        assert message in api_support.rejection(lambda manifest=manifest: create(kube, namespace, manifest))


@pytest.mark.parametrize("version", [c.V1ALPHA1, c.V1])
def test_checkpoint_storage_cannot_change_once_set(kube: Kube, namespace: str, version: str) -> None:
    checkpoint = {"enabled": True, "storage": {"size": "1Gi"}, "deleteOnCompletion": False}
    create(
        kube,
        namespace,
        convert(job_manifest("ckpt", complete_after=None, checkpoint=checkpoint), f"{c.GROUP}/{version}"),
    )

    def patch(spec: dict[str, Any]) -> Any:
        return kube.custom.patch_namespaced_custom_object(c.GROUP, version, namespace, c.PLURAL, "ckpt", {"spec": spec})

    for change, field in (
        ({"checkpoint": {"storage": {"size": "2Gi"}}}, "checkpoint.storage cannot change or be removed once set"),
        ({"checkpoint": {"storage": None}}, "checkpoint.storage cannot change or be removed once set"),
        ({"checkpoint": None}, "checkpoint.storage cannot change or be removed once set"),
        ({"checkpoint": {"deleteOnCompletion": True}}, "checkpoint.deleteOnCompletion cannot change"),
    ):
        assert field in api_support.rejection(lambda change=change: patch(copy.deepcopy(change)))
    assert patch({"checkpoint": {"dir": "/elsewhere", "enabled": False}})["spec"]["checkpoint"]["dir"] == "/elsewhere"


def test_every_example_applies_with_kubectl(cluster: ClusterUnderTest, namespace: str) -> None:
    """As a user of the lab applies them (they are v1alpha1, converted to the stored v1 by the webhook): kubectl,
    server-side dry run, since the examples are real training jobs."""
    examples = [
        (path, document)
        for path in sorted((MANIFESTS.parents[2] / "examples").rglob("*.yaml"))
        if (document := yaml.safe_load(path.read_text())).get("kind") == c.KIND  # images.yaml is not one
    ]
    assert len(examples) >= 9
    for path, document in examples:
        outcome = apply(cluster, document, namespace, "--dry-run=server")
        assert outcome.code == 0 and "(server dry run)" in outcome.out, f"{path}: {outcome.err}"
