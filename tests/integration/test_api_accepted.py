"""The real API server accepts valid TrainingJobs as the schema promises: it fills in the defaults (also of the
lifecycle fields), keeps hyperparameters' JSON types and every field of a job that sets them all, and publishes the
schema's descriptions to `kubectl explain`.

What it rejects is in test_api_validation.py; updates and the scale subresource in test_api_updates.py.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.integration import api_support
from tests.integration.api_support import create, job, read, volumes
from tests.kube import Kube, wait_until
from trainingjob.api import constants as c
from trainingjob.api.schema import crd_manifest

pytestmark = pytest.mark.integration

served_crd = api_support.served_crd  # autouse: each test here runs once TrainingJobs are served


@pytest.fixture(autouse=True)
def referenced_objects(kube: Kube, namespace: str) -> None:
    """The claims and PriorityClass the jobs below name exist (the validating webhook refuses missing ones)."""
    api_support.existing_claims(kube, namespace, "imagenet", "shared-ckpt")
    api_support.ensure_priority_class(kube, "high")


# --- accepted jobs ------------------------------------------------------------------------------------------------


def test_minimal_job_is_accepted_with_defaults(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job())
    spec = read(kube, namespace, "train")["spec"]
    assert spec["workers"] == 1
    assert spec["gpuPerWorker"] == 0
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["backoffLimit"] == 3
    assert spec["checkpointDir"] == c.DEFAULT_CHECKPOINT_DIR
    assert spec["checkpointInterval"] == 1
    assert spec["networking"] == {"masterPort": c.DEFAULT_MASTER_PORT}
    assert "dataVolume" not in spec
    assert spec["suspend"] is False
    assert spec["cleanPodPolicy"] == "Running"
    assert spec["successPolicy"] == "AllWorkers"
    assert spec["failurePolicy"] == {"restartStrategy": "Gang", "backoff": {"baseSeconds": 10, "maxSeconds": 300}}
    for optional in ("activeDeadlineSeconds", "startupTimeoutSeconds", "ttlSecondsAfterFinished", "checkpoint"):
        assert optional not in spec


def test_data_volume_defaults(kube: Kube, namespace: str) -> None:
    create(kube, namespace, job(dataVolume={"claimName": "imagenet"}))
    assert read(kube, namespace, "train")["spec"]["dataVolume"] == {
        "claimName": "imagenet",
        "readOnly": True,
        "mountPath": c.DEFAULT_DATA_MOUNT_PATH,
    }


def test_hyperparameters_keep_their_json_types(kube: Kube, namespace: str) -> None:
    hyperparameters = {"lr": 0.001, "epochs": 10, "name": "x", "amp": True}
    create(kube, namespace, job(hyperparameters=hyperparameters))
    stored = read(kube, namespace, "train")["spec"]["hyperparameters"]
    assert stored == hyperparameters
    assert {key: type(value) for key, value in stored.items()} == {"lr": float, "epochs": int, "name": str, "amp": bool}


def test_every_field_at_once_is_accepted(kube: Kube, namespace: str) -> None:
    """The rules reject only what they should: a job using every field passes."""
    full = job(
        framework="tensorflow",
        args=["--epochs", "3"],
        env=[{"name": "LOG_LEVEL", "value": "debug"}, {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
        workers=4,
        gpuPerWorker=2,
        resources={"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"memory": "16Gi", "cpu": 8}},
        dataVolume={"claimName": "imagenet", "readOnly": False, "mountPath": "/datasets/imagenet"},
        checkpointDir="/ckpt",
        checkpointInterval=5,
        hyperparameters={"lr": 3e-4, "batch_size": 256, "optimizer": "adamw", "amp": False, "warmup.steps": 100},
        model="resnet50",
        dataset="imagenet-1k",
        restartPolicy="ExitCode",
        backoffLimit=0,
        networking={"masterPort": 23456, "backend": "nccl"},
        scheduling={
            "nodeSelector": {"accelerator": "nvidia-gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "priorityClassName": "high",
            "schedulerName": "default-scheduler",
        },
        serviceAccountName="trainer",
        imagePullSecrets=[{"name": "registry"}],
        podLabels={"team": "vision"},
        podAnnotations={f"{c.GROUP}/note": "annotations are not reserved"},
        volumes=[{"name": "scratch", "emptyDir": {}}, {"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}, {"name": "ckpt", "mountPath": "/ckpt"}],
        securityContext={"runAsNonRoot": True, "runAsUser": 1000},
    )
    created = create(kube, namespace, full)
    assert created["spec"]["volumes"][1]["persistentVolumeClaim"] == {"claimName": "c"}, "volume sources are kept"
    assert created["spec"]["hyperparameters"]["lr"] == 3e-4


def test_lifecycle_fields_are_accepted_with_defaults(kube: Kube, namespace: str) -> None:
    """Every lifecycle field, each object given only what it needs: the API server fills in the rest."""
    create(
        kube,
        namespace,
        job(
            dataVolume={"claimName": "imagenet"},
            activeDeadlineSeconds=3600,
            startupTimeoutSeconds=600,
            ttlSecondsAfterFinished=0,
            failurePolicy={"rules": [{"exitCodes": [1, 2], "action": "Fail"}]},
            checkpoint={"enabled": True, "dir": "/ckpt", "interval": 2, "keepLast": 3, "storage": {"size": "10Gi"}},
        ),
    )
    spec = read(kube, namespace, "train")["spec"]
    assert spec["suspend"] is False
    assert (spec["activeDeadlineSeconds"], spec["startupTimeoutSeconds"], spec["ttlSecondsAfterFinished"]) == (
        3600,
        600,
        0,
    )
    assert (spec["cleanPodPolicy"], spec["successPolicy"]) == ("Running", "AllWorkers")
    assert spec["failurePolicy"] == {
        "restartStrategy": "Gang",
        "rules": [{"exitCodes": [1, 2], "action": "Fail"}],
        "backoff": {"baseSeconds": 10, "maxSeconds": 300},
    }
    assert spec["checkpoint"] == {
        "enabled": True,
        "dir": "/ckpt",
        "interval": 2,
        "keepLast": 3,
        "deleteOnCompletion": False,
        "storage": {"size": "10Gi", "accessModes": ["ReadWriteMany"]},
    }


def test_every_lifecycle_field_set_is_kept(kube: Kube, namespace: str) -> None:
    """Non-default values everywhere, and the other checkpoint storage (an existing claim)."""
    lifecycle = {
        "suspend": True,
        "activeDeadlineSeconds": 86400,
        "startupTimeoutSeconds": 1,
        "ttlSecondsAfterFinished": 300,
        "cleanPodPolicy": "None",
        "successPolicy": "Rank0",
        "failurePolicy": {
            "restartStrategy": "Worker",
            "rules": [
                {"exitCodes": [0, 255], "action": "Ignore"},
                {"exitCodes": [137, 143], "action": "Restart"},
                {"exitCodes": [3], "action": "Fail"},
            ],
            "backoff": {"baseSeconds": 60, "maxSeconds": 60},
        },
        "checkpoint": {
            "enabled": True,
            "dir": "/mnt/checkpoints",
            "interval": 1,
            "keepLast": 1,
            "deleteOnCompletion": True,
            "storage": {"size": 5368709120, "storageClassName": "fast", "accessModes": ["ReadWriteOnce"]},
        },
    }
    created = create(
        kube,
        namespace,
        job(
            dataVolume={"claimName": "imagenet", "mountPath": "/data"},
            volumes=volumes("scratch"),
            volumeMounts=[{"name": "scratch", "mountPath": "/mnt/checkpoints/tmp"}],
            **lifecycle,
        ),
    )
    assert {key: created["spec"][key] for key in lifecycle} == lifecycle
    claim = job("claim", checkpoint={"enabled": True, "storage": {"claimName": "shared-ckpt"}})
    stored = create(kube, namespace, claim)["spec"]["checkpoint"]
    assert stored["storage"] == {"claimName": "shared-ckpt", "accessModes": ["ReadWriteMany"]}
    assert stored["deleteOnCompletion"] is False
    disabled = job("disabled", checkpoint={"enabled": False})
    assert create(kube, namespace, disabled)["spec"]["checkpoint"] == {"enabled": False, "deleteOnCompletion": False}


# --- documentation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "path", "kind"),
    [
        (c.V1ALPHA1, "spec.workers", "<integer>"),
        (c.V1ALPHA1, "spec.suspend", "<boolean>"),
        (c.V1ALPHA1, "spec.failurePolicy.backoff.maxSeconds", "<integer>"),
        (c.V1, "spec.numWorkers", "<integer>"),
        (c.V1, "spec.checkpoint.frequency", "<integer>"),
        (c.V1, "spec.checkpoint.storage.type", "<string>"),
        (c.V1, "status.state", "<string>"),
        (c.V1, "status.progressDetails.estimatedRemainingSeconds", "<integer>"),
    ],
)
def test_kubectl_explain_prints_the_description(cluster: Any, version: str, path: str, kind: str) -> None:
    schema = next(v for v in crd_manifest()["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    for name in path.split("."):
        schema = schema["properties"][name]
    description = " ".join(schema["description"].split())

    def explained() -> str | None:
        result = subprocess.run(
            [
                *(cluster.kubectl, "--kubeconfig", str(cluster.kubeconfig), "explain", f"trainingjob.{path}"),
                f"--api-version={c.GROUP}/{version}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        text = " ".join(result.stdout.split())
        return text if result.returncode == 0 and description in text else None

    text = wait_until(explained, 30, "kubectl explain to show the published schema", interval=1)
    assert kind in text
