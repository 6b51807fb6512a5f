"""The real API server enforces the TrainingJob schema on create: every invalid spec (or job name) in one table,
INVALID, is rejected with 422 naming the field; and the one check it cannot make (hyperparameter keys) is left to
the operator.

Accepted jobs and their defaults are in test_api_accepted.py; updates and the scale subresource in
test_api_updates.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration import api_support
from tests.integration.api_support import DROP, create, job, rejection, volumes
from tests.kube import Kube
from trainingjob.api import constants as c

pytestmark = pytest.mark.integration

served_crd = api_support.served_crd  # autouse: each test here runs once TrainingJobs are served

# --- rejected jobs --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invalid:
    """A spec change (or a job name) the API server must reject, and fragments its message must contain."""

    id: str
    spec: dict[str, Any] = field(default_factory=dict)
    expect: tuple[str, ...] = ()
    name: str = "train"


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
        ("spec.checkpoint", "checkpoint.enabled needs checkpoint.storage: a claimName or a size, or type s3"),
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
    Invalid(
        "checkpoint-storage-two-classes",
        storage(size="1Gi", storageClassName="fast", storageClass="slow"),
        ("spec.checkpoint.storage.storageClass", "two names of one field"),
    ),
    Invalid(
        "checkpoint-storage-s3-with-class",
        storage(type="s3", path="s3://bucket/ckpt", storageClass="fast"),
        ("spec.checkpoint.storage", "describe a PVC"),
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
    # Issue 41: a 1.2 MB value was accepted and copied into every worker's environment and the ConfigMap.
    Invalid(
        "hyperparameter-value-of-1.2-MB",
        {"hyperparameters": {"notes": "x" * 1_200_000}},
        ("spec.hyperparameters.notes", "Too long: may not be more than 4096"),
    ),
    Invalid("model-too-long", {"model": "m" * 2049}, ("spec.model", "Too long: may not be more than 2048")),
    Invalid("dataset-too-long", {"dataset": "d" * 2049}, ("spec.dataset", "Too long: may not be more than 2048")),
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
    Invalid(
        "podLabels-lab-worker",
        {"podLabels": {c.LABEL_LAB_WORKER: "mine"}},
        ("spec.podLabels", "reserved for the operator", c.LABEL_LAB_WORKER),
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
    # Found by the spec fuzzing (issue 41): a name with '/' reached the validating webhook's GET as a subresource
    # path (serviceAccountName "F/HX7" read serviceaccounts/F/HX7); the names of objects it reads are DNS subdomains.
    Invalid("serviceAccountName-path", {"serviceAccountName": "F/HX7"}, ("spec.serviceAccountName", "should match")),
    Invalid(
        "priorityClassName-path",
        {"scheduling": {"priorityClassName": "high/status"}},
        ("spec.scheduling.priorityClassName", "should match"),
    ),
    Invalid(
        "dataVolume-claimName-path",
        {"dataVolume": {"claimName": "data/status"}},
        ("spec.dataVolume.claimName", "should match"),
    ),
    Invalid(
        "checkpoint-claimName-path",
        {"checkpoint": {"storage": {"claimName": "data/status"}}},
        ("spec.checkpoint.storage.claimName", "should match"),
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
