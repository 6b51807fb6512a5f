"""The real API server enforces the TrainingJob schema: defaults, preserved hyperparameter types, every invalid
spec rejected with 422 naming the field, immutability, the scale subresource and `kubectl explain`."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as c
from trainingjob.api.schema import crd_manifest

pytestmark = pytest.mark.integration

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


# --- rejected jobs --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invalid:
    """A spec change (or a job name) the API server must reject, and fragments its message must contain."""

    id: str
    spec: dict[str, Any] = field(default_factory=dict)
    expect: tuple[str, ...] = ()
    name: str = "train"


def volumes(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "emptyDir": {}} for name in names]


def storage(**fields: Any) -> dict[str, Any]:
    """spec overrides for an enabled checkpoint with these storage fields."""
    return {"checkpoint": {"enabled": True, "storage": fields}}


def failure_rule(**fields: Any) -> dict[str, Any]:
    return {"failurePolicy": {"rules": [fields]}}


LIFECYCLE_INVALID = [
    Invalid("suspend-as-string", {"suspend": "yes"}, ("spec.suspend", "must be of type boolean")),
    Invalid("activeDeadlineSeconds-0", {"activeDeadlineSeconds": 0}, ("spec.activeDeadlineSeconds", "or equal to 1")),
    Invalid("startupTimeoutSeconds-0", {"startupTimeoutSeconds": 0}, ("spec.startupTimeoutSeconds", "or equal to 1")),
    Invalid(
        "negative-ttlSecondsAfterFinished",
        {"ttlSecondsAfterFinished": -1},
        ("spec.ttlSecondsAfterFinished", "greater than or equal to 0"),
    ),
    Invalid("unknown-cleanPodPolicy", {"cleanPodPolicy": "Some"}, ("spec.cleanPodPolicy", "Unsupported value")),
    Invalid("unknown-successPolicy", {"successPolicy": "Rank1"}, ("spec.successPolicy", "Unsupported value")),
    Invalid(
        "unknown-restartStrategy",
        {"failurePolicy": {"restartStrategy": "Pod"}},
        ("spec.failurePolicy.restartStrategy", "Unsupported value"),
    ),
    Invalid(
        "failure-rule-without-action",
        failure_rule(exitCodes=[1]),
        ("spec.failurePolicy.rules[0].action", "Required value"),
    ),
    Invalid(
        "failure-rule-unknown-action",
        failure_rule(exitCodes=[1], action="Retry"),
        ("spec.failurePolicy.rules[0].action", "Unsupported value"),
    ),
    Invalid(
        "failure-rule-without-exitCodes",
        failure_rule(action="Fail"),
        ("spec.failurePolicy.rules[0].exitCodes", "Required value"),
    ),
    Invalid(
        "failure-rule-empty-exitCodes",
        failure_rule(exitCodes=[], action="Fail"),
        ("spec.failurePolicy.rules[0].exitCodes", "at least 1 item"),
    ),
    Invalid(
        "failure-rule-exitCode-256",
        failure_rule(exitCodes=[1, 256], action="Fail"),
        ("spec.failurePolicy.rules[0].exitCodes[1]", "less than or equal to 255"),
    ),
    Invalid(
        "too-many-failure-rules",
        {"failurePolicy": {"rules": [{"exitCodes": [i], "action": "Fail"} for i in range(33)]}},
        ("spec.failurePolicy.rules", "at most 32"),
    ),
    Invalid(
        "backoff-baseSeconds-0",
        {"failurePolicy": {"backoff": {"baseSeconds": 0}}},
        ("spec.failurePolicy.backoff.baseSeconds", "greater than or equal to 1"),
    ),
    Invalid(
        "backoff-maxSeconds-beyond-a-day",
        {"failurePolicy": {"backoff": {"maxSeconds": 86401}}},
        ("spec.failurePolicy.backoff.maxSeconds", "less than or equal to 86400"),
    ),
    Invalid(
        "backoff-max-below-base",
        {"failurePolicy": {"backoff": {"baseSeconds": 60, "maxSeconds": 30}}},
        ("spec.failurePolicy.backoff.maxSeconds", "maxSeconds must be at least baseSeconds"),
    ),
    Invalid(
        "backoff-max-below-default-base",
        {"failurePolicy": {"backoff": {"maxSeconds": 5}}},
        ("spec.failurePolicy.backoff.maxSeconds", "maxSeconds must be at least baseSeconds"),
    ),
    Invalid(
        "checkpoint-enabled-without-storage",
        {"checkpoint": {"enabled": True}},
        ("spec.checkpoint", "checkpoint.enabled needs checkpoint.storage: a claimName or a size"),
    ),
    Invalid(
        "checkpoint-storage-claim-and-size",
        storage(claimName="c", size="1Gi"),
        ("spec.checkpoint.storage", "exactly one of claimName (an existing PVC) and size"),
    ),
    Invalid(
        "checkpoint-storage-neither",
        storage(storageClassName="fast"),
        ("spec.checkpoint.storage", "exactly one of claimName (an existing PVC) and size"),
    ),
    Invalid("checkpoint-storage-empty-claimName", storage(claimName=""), ("spec.checkpoint.storage.claimName",)),
    Invalid("checkpoint-storage-bad-size", storage(size="big"), ("spec.checkpoint.storage.size", "should match")),
    Invalid(
        "checkpoint-storage-size-0",
        storage(size="0Gi"),
        ("spec.checkpoint.storage.size", "must be a positive quantity"),
    ),
    Invalid(
        "checkpoint-storage-unknown-accessMode",
        storage(size="1Gi", accessModes=["Sometimes"]),
        ("spec.checkpoint.storage.accessModes[0]", "Unsupported value"),
    ),
    Invalid(
        "checkpoint-storage-no-accessModes",
        storage(size="1Gi", accessModes=[]),
        ("spec.checkpoint.storage.accessModes", "at least 1 item"),
    ),
    Invalid(
        "checkpoint-storage-duplicate-accessModes",
        storage(size="1Gi", accessModes=["ReadWriteOnce", "ReadWriteOnce"]),
        ("spec.checkpoint.storage.accessModes[1]", "Duplicate value"),
    ),
    Invalid("checkpoint-relative-dir", {"checkpoint": {"dir": "ckpt"}}, ("spec.checkpoint.dir", "should match")),
    Invalid(
        "checkpoint-dir-at-operator-path",
        {"checkpoint": {"dir": c.SHM_MOUNT_PATH}},
        ("spec.checkpoint.dir", "must differ from the paths the operator mounts"),
    ),
    Invalid(
        "checkpoint-dir-at-dataVolume",
        {"dataVolume": {"claimName": "d", "mountPath": "/data"}, "checkpoint": {"dir": "/data"}},
        ("spec.checkpoint.dir", "checkpoint.dir must differ from dataVolume.mountPath"),
    ),
    Invalid(
        "checkpoint-interval-0",
        {"checkpoint": {"interval": 0}},
        ("spec.checkpoint.interval", "greater than or equal to 1"),
    ),
    Invalid(
        "checkpoint-keepLast-0",
        {"checkpoint": {"keepLast": 0}},
        ("spec.checkpoint.keepLast", "greater than or equal to 1"),
    ),
    Invalid(
        "volumeMount-at-enabled-checkpoint-dir",
        {
            **storage(claimName="c"),
            "volumes": volumes("ckpt"),
            "volumeMounts": [{"name": "ckpt", "mountPath": c.DEFAULT_CHECKPOINT_DIR}],
        },
        ("spec.volumeMounts", "must differ from the checkpoint directory"),
    ),
]

INVALID = [
    Invalid("missing-framework", {"framework": DROP}, ("spec.framework", "Required value")),
    Invalid("unknown-framework", {"framework": "caffe"}, ("spec.framework", "Unsupported value")),
    Invalid("missing-image", {"image": DROP}, ("spec.image", "Required value")),
    Invalid("empty-image", {"image": ""}, ("spec.image",)),
    Invalid("missing-command", {"command": DROP}, ("spec.command", "Required value")),
    Invalid("empty-command", {"command": []}, ("spec.command",)),
    Invalid("workers-0", {"workers": 0}, ("spec.workers", "greater than or equal to 1")),
    Invalid("workers-1025", {"workers": 1025}, ("spec.workers", "less than or equal to 1024")),
    Invalid("workers-as-string", {"workers": "4"}, ("spec.workers", "must be of type integer")),
    Invalid("gpuPerWorker-9", {"gpuPerWorker": 9}, ("spec.gpuPerWorker", "less than or equal to 8")),
    Invalid("negative-backoffLimit", {"backoffLimit": -1}, ("spec.backoffLimit",)),
    Invalid("unknown-restartPolicy", {"restartPolicy": "Always"}, ("spec.restartPolicy", "Unsupported value")),
    Invalid("checkpointInterval-0", {"checkpointInterval": 0}, ("spec.checkpointInterval",)),
    Invalid("relative-checkpointDir", {"checkpointDir": "checkpoints"}, ("spec.checkpointDir", "should match")),
    *[
        Invalid(f"reserved-env-{name}", {"env": [{"name": name, "value": "1"}]}, ("spec.env[0].name", name))
        for name in ("WORLD_SIZE", "RANK", "TF_CONFIG", "MASTER_ADDR")
    ],
    Invalid(
        "env-HYPERPARAM-prefix",
        {"env": [{"name": "A", "value": "1"}, {"name": "HYPERPARAM_LR", "value": "1"}]},
        ("spec.env[1].name", "HYPERPARAM_LR is injected by the operator"),
    ),
    Invalid("env-TRAININGJOB-prefix", {"env": [{"name": "TRAININGJOB_X"}]}, ("spec.env[0].name", "reserved")),
    Invalid("env-name-not-identifier", {"env": [{"name": "1ST"}]}, ("spec.env[0].name", "should match")),
    Invalid("hyperparameter-object", {"hyperparameters": {"opt": {"name": "adam"}}}, ("spec.hyperparameters.opt",)),
    Invalid("hyperparameter-list", {"hyperparameters": {"layers": [64, 64]}}, ("spec.hyperparameters.layers",)),
    Invalid(
        "too-many-hyperparameters",
        {"hyperparameters": {f"k{i}": i for i in range(65)}},
        ("spec.hyperparameters", "at most 64"),
    ),
    Invalid("nccl-without-gpus", {"networking": {"backend": "nccl"}}, ("spec.networking.backend", "nccl needs GPUs")),
    Invalid("unknown-backend", {"networking": {"backend": "mpi"}}, ("spec.networking.backend", "Unsupported value")),
    Invalid("masterPort-80", {"networking": {"masterPort": 80}}, ("spec.networking.masterPort",)),
    Invalid(
        "gpu-in-limits",
        {"resources": {"limits": {c.GPU_RESOURCE: 1}}},
        ("spec.resources.limits", "use spec.gpuPerWorker"),
    ),
    Invalid(
        "gpu-in-requests",
        {"resources": {"requests": {c.GPU_RESOURCE: "1"}}},
        ("spec.resources.requests", "use spec.gpuPerWorker"),
    ),
    Invalid("bad-quantity", {"resources": {"requests": {"cpu": "lots"}}}, ("spec.resources.requests.cpu",)),
    Invalid("dataVolume-without-claimName", {"dataVolume": {"readOnly": True}}, ("spec.dataVolume.claimName",)),
    Invalid(
        "dataVolume-at-checkpointDir",
        {"dataVolume": {"claimName": "d", "mountPath": "/checkpoints"}},
        ("spec.dataVolume.mountPath", "must differ from checkpointDir"),
    ),
    Invalid("name-too-long", {}, ("metadata.name", "at most 51 characters"), name="a" * 52),
    Invalid("name-starts-with-digit", {}, ("metadata.name", "DNS-1035"), name="1job"),
    Invalid("reserved-volume-name", {"volumes": volumes("data")}, ("spec.volumes[0].name", "reserved")),
    Invalid("duplicate-volume-names", {"volumes": volumes("a", "a")}, ("spec.volumes[1]", "Duplicate value")),
    Invalid(
        "volumeMount-of-unknown-volume",
        {"volumeMounts": [{"name": "nope", "mountPath": "/x"}]},
        ("spec.volumeMounts", "must name an entry of spec.volumes"),
    ),
    Invalid(
        "volumeMount-over-operator-path",
        {"volumes": volumes("a"), "volumeMounts": [{"name": "a", "mountPath": c.CONFIG_MOUNT_PATH}]},
        ("spec.volumeMounts", "must differ from the paths the operator mounts"),
    ),
    Invalid(
        "podLabels-operator-key",
        {"podLabels": {c.LABEL_JOB_NAME: "other"}},
        ("spec.podLabels", "reserved for the operator", c.LABEL_JOB_NAME),
    ),
    Invalid(
        "podLabels-managed-by",
        {"podLabels": {c.LABEL_MANAGED_BY: "me"}},
        ("spec.podLabels", "reserved for the operator", c.LABEL_MANAGED_BY),
    ),
    Invalid("podLabels-bad-value", {"podLabels": {"team": "a b"}}, ("spec.podLabels.team", "should match")),
    Invalid(
        "toleration-bad-operator",
        {"scheduling": {"tolerations": [{"key": "k", "operator": "In"}]}},
        ("spec.scheduling.tolerations[0].operator", "Unsupported value"),
    ),
    Invalid(
        "toleration-exists-with-value",
        {"scheduling": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
        ("spec.scheduling.tolerations[0]", "must not set a value"),
    ),
    *LIFECYCLE_INVALID,
]


@pytest.mark.parametrize("case", INVALID, ids=[case.id for case in INVALID])
def test_invalid_spec_is_rejected(kube: Kube, namespace: str, case: Invalid) -> None:
    message = rejection(lambda: create(kube, namespace, job(case.name, **case.spec)))
    for fragment in case.expect:
        assert fragment in message


def test_api_server_cannot_check_hyperparameter_keys(kube: Kube, namespace: str) -> None:
    """CEL cannot see a map whose values are untyped, so key syntax is the operator's check (InvalidSpec).
    If this starts failing, the API server learned to enforce it: move the case into INVALID."""
    created = create(kube, namespace, job(hyperparameters={"bad key!": 1}), dry_run=True)
    assert created["spec"]["hyperparameters"] == {"bad key!": 1}


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


# --- documentation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("spec.workers", "<integer>"),
        ("spec.suspend", "<boolean>"),
        ("spec.failurePolicy.backoff.maxSeconds", "<integer>"),
    ],
)
def test_kubectl_explain_prints_the_description(cluster: Any, path: str, kind: str) -> None:
    schema = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for name in path.split("."):
        schema = schema["properties"][name]
    description = " ".join(schema["description"].split())

    def explained() -> str | None:
        result = subprocess.run(
            [cluster.kubectl, "--kubeconfig", str(cluster.kubeconfig), "explain", f"trainingjob.{path}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        text = " ".join(result.stdout.split())
        return text if result.returncode == 0 and description in text else None

    text = wait_until(explained, 30, "kubectl explain to show the published schema", interval=1)
    assert kind in text
