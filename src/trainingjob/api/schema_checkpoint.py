"""spec.checkpoint: the storage the operator mounts into every worker (and may create), where each run's
checkpoints go, and how the training code checkpoints.

Each run has a directory of its own: CHECKPOINT_DIR is <checkpoint.dir>/<the job's uid>, so a job deleted and
submitted again under the same name, on the same claim, neither resumes from nor prunes the previous run's
checkpoints. Starting from another run's checkpoint is an explicit request: checkpoint.resumeFrom.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, cel_list, integer, node, obj, rule, string
from trainingjob.api.schema_pod import (
    ABSOLUTE_PATH,
    MAX_NAME_LENGTH,
    MAX_PATH_LENGTH,
    OBJECT_NAME,
    OPERATOR_MOUNTS,
    QUANTITY,
)
from trainingjob.api.versions import VersionShape

CHECKPOINT_CLAIM = "<job>-checkpoints"
DEFAULT_ACCESS_MODES = ["ReadWriteMany"]
# An object-store URI: s3://bucket/prefix or gs://bucket/prefix (bucket names as both stores allow them).
OBJECT_STORE_URI = r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[^\s]*)?$"
URI_SCHEMES = {"s3": "s3://", "gcs": "gs://"}
RELATIVE_PATH = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?$"
PARENT_SEGMENT = r"(^|/)[.][.](/|$)"


def _storage_type() -> Schema:
    return string(
        "Kind of storage. pvc (the default when unset): a PersistentVolumeClaim the workers mount at the checkpoint "
        "directory, given by claimName or created from size. s3 or gcs: an object store the training code writes "
        "to itself; the operator passes path to every worker as CHECKPOINT_URI (credentials come from secretName, "
        "serviceAccountName or env) and mounts an emptyDir at the checkpoint directory: local, non-persistent "
        "scratch space. With s3, trainingjob.sdk's save_checkpoint uploads each checkpoint there and prunes it to "
        "keepLast, and latest_checkpoint downloads the newest (with boto3 in the image); gcs is passed on only.",
        enum=list(c.CHECKPOINT_STORAGE_TYPES),
    )


def _storage_rules() -> list[Schema]:
    object_store = "has(self.type) && self.type != 'pvc'"
    scheme_checks = " || ".join(
        f"(self.type == '{kind}' && self.path.startsWith('{scheme}'))" for kind, scheme in URI_SCHEMES.items()
    )
    return [
        rule(
            f"({object_store}) || has(self.claimName) != has(self.size)",
            "checkpoint.storage of type pvc needs exactly one of claimName (an existing PVC) and size (a PVC the "
            "operator creates)",
        ),
        rule(
            f"!({object_store}) || (!has(self.claimName) && !has(self.size) && !has(self.storageClassName)"
            " && !has(self.storageClass))",
            "checkpoint.storage.claimName, size and storageClassName (storageClass) describe a PVC: they do not go "
            "with type s3 or gcs",
        ),
        rule(
            f"!has(self.path) || ({object_store})",
            "checkpoint.storage.path is the s3:// or gs:// URI of type s3 or gcs; a pvc is mounted at "
            "checkpoint.dir instead",
            field_path=".path",
        ),
        rule(
            f"!({object_store}) || (has(self.path) && ({scheme_checks}))",
            "checkpoint.storage of type s3 needs path s3://<bucket>/<prefix>, and of type gcs path "
            "gs://<bucket>/<prefix>",
            field_path=".path",
        ),
        rule(
            "!has(self.storageClass) || !has(self.storageClassName) || self.storageClass == self.storageClassName",
            "checkpoint.storage.storageClass and storageClassName are two names of one field: give one of them",
            field_path=".storageClass",
        ),
        rule(
            f"!has(self.secretName) || ({object_store})",
            "checkpoint.storage.secretName gives an object store's credentials: it goes with type s3 or gcs only",
            field_path=".secretName",
        ),
    ]


def _storage() -> Schema:
    return obj(
        "Where checkpoints are stored. A PVC (type pvc, the default): either claimName, an existing "
        f"PersistentVolumeClaim, or size (with storageClassName and accessModes), for which the operator creates "
        f"the PVC {CHECKPOINT_CLAIM}. An object store (type s3 or gcs): path, the URI the training code writes to. "
        "Immutable once set: the storage holds this job's checkpoints.",
        {
            "type": _storage_type(),
            "path": string(
                "For type s3 or gcs: the URI checkpoints go to, s3://<bucket>/<prefix> or gs://<bucket>/<prefix>, "
                "passed to workers as CHECKPOINT_URI. Not used with pvc.",
                max_length=MAX_PATH_LENGTH,
                pattern=OBJECT_STORE_URI,
            ),
            "secretName": string(
                "For type s3 or gcs: a Secret in the job's namespace whose keys become environment variables of "
                "every worker (envFrom), e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and "
                "AWS_REGION, which boto3 reads (`tj cluster s3-secret` writes one for the local cluster's S3 "
                "server). Not used with pvc.",
                min_length=1,
                max_length=MAX_NAME_LENGTH,
            ),
            "claimName": string(
                "Name of an existing PersistentVolumeClaim in the job's namespace to mount; the operator never "
                "deletes it. Mutually exclusive with size.",
                min_length=1,
                max_length=MAX_NAME_LENGTH,
                pattern=OBJECT_NAME,
            ),
            "size": node(
                None,
                f"Requested storage of the PVC {CHECKPOINT_CLAIM} the operator creates: a positive quantity such as "
                "100Gi. Mutually exclusive with claimName.",
                any_of=[{"type": "integer"}, {"type": "string"}],
                pattern=QUANTITY,
                int_or_string=True,
                rules=[
                    rule(
                        "!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",
                        "checkpoint.storage.size must be a positive quantity, e.g. 100Gi",
                    )
                ],
            ),
            "storageClassName": string(
                "StorageClass of the PVC the operator creates (with size); empty or absent: the cluster's default "
                "StorageClass. Ignored with claimName.",
                max_length=MAX_NAME_LENGTH,
            ),
            "storageClass": string(
                "The seed guide's name of storageClassName, accepted as the guide writes it: set one (or both, equal).",
                max_length=MAX_NAME_LENGTH,
            ),
            "accessModes": array(
                "Access modes of the PVC the operator creates (with size). Defaults to [ReadWriteMany], which lets "
                "workers on different nodes mount it; many default StorageClasses (cloud block disks) cannot "
                "provide it and leave the PVC Pending, which the job reports (condition Blocked, reason "
                "CheckpointVolumePending): pick a StorageClass that can (NFS, CephFS, EFS, Filestore, ...) or "
                "claimName. ReadWriteOnce only works when every worker runs on one node. Ignored unless the operator "
                "creates the PVC.",
                string(f"An access mode: one of {', '.join(c.ACCESS_MODES)}.", enum=list(c.ACCESS_MODES)),
                min_items=1,
                max_items=len(c.ACCESS_MODES),
                list_type="set",
                default=DEFAULT_ACCESS_MODES,
            ),
        },
        rules=_storage_rules(),
    )


def _needs_storage_message(shape: VersionShape) -> str:
    message = "checkpoint.enabled needs checkpoint.storage: a claimName or a size, or type s3 or gcs with a path"
    if shape.default_checkpoint_enabled:
        message += (
            f" (enabled is true unless set to false; with enabled: false, dir and {shape.checkpoint_interval} are "
            "still passed to the workers)"
        )
    return message


def checkpoint_schema(shape: VersionShape) -> Schema:
    enabled_default = "true" if shape.default_checkpoint_enabled else "false: nothing is mounted"
    return obj(
        "Checkpoint storage the operator mounts into every worker, and how the training code checkpoints. "
        f"dir, {shape.checkpoint_interval} and keepLast are passed to the workers whether or not storage is enabled.",
        {
            "enabled": boolean(
                "Use checkpoint.storage: mount it at the checkpoint directory of every worker (and create the PVC "
                "for storage.size), or pass an object store's path as CHECKPOINT_URI. Needs storage. Defaults to "
                f"{enabled_default}.",
                default=shape.default_checkpoint_enabled,
            ),
            "dir": string(
                "Absolute path in every worker where storage is mounted. Each run saves its checkpoints in a "
                "directory of its own, <dir>/<the job's uid> (CHECKPOINT_DIR), so a job submitted again under the "
                "same name neither resumes from nor prunes an earlier run's (see resumeFrom). Defaults to "
                f"spec.checkpointDir; must differ from dataVolume.mountPath and from {', '.join(OPERATOR_MOUNTS)}.",
                pattern=ABSOLUTE_PATH,
                max_length=MAX_PATH_LENGTH,
                rules=[
                    rule(
                        f"!(self in {cel_list(OPERATOR_MOUNTS)})",
                        f"checkpoint.dir must differ from the paths the operator mounts: {', '.join(OPERATOR_MOUNTS)}",
                    )
                ],
            ),
            shape.checkpoint_interval: integer(
                "Save a checkpoint every this many epochs (CHECKPOINT_INTERVAL); at least 1. Defaults to "
                "spec.checkpointInterval (1 unless set).",
                minimum=1,
            ),
            "keepLast": integer(
                "How many of the newest checkpoints the training code should keep in its run's directory "
                "(CHECKPOINT_KEEP_LAST); the operator deletes none itself. At least 1; unset: the variable is not "
                "set and the training code decides.",
                minimum=1,
            ),
            "deleteOnCompletion": boolean(
                f"Whether the PVC {CHECKPOINT_CLAIM} the operator creates for storage.size goes with the job. "
                "false (default): it has no owner and outlives the job, so a new job can start from it "
                "(resumeFrom) or a server load the model; delete it by hand. true: it is owned by the TrainingJob and "
                "garbage-collected when the job is deleted (by hand or by ttlSecondsAfterFinished). Read when the "
                "PVC is created, so it cannot change once storage is set. A claimName PVC is never deleted.",
                default=False,
            ),
            "resumeFrom": _resume_from(),
            "storage": _storage(),
        },
        rules=[
            rule(
                "!has(self.enabled) || !self.enabled || has(self.storage)",
                _needs_storage_message(shape),
            )
        ],
    )


def _resume_from() -> Schema:
    return string(
        "An earlier run's checkpoint to start this job from; a new job never does so by itself (its checkpoints go "
        "to a directory of its own, named by its uid). A path relative to the root of the checkpoint storage: a "
        "run's directory (<that job's uid>: its newest checkpoint), one checkpoint (<uid>/ckpt-00000057.json), or "
        "'.' for checkpoints at the root, written before runs had directories of their own; for storage of type "
        "s3 or gcs, relative to storage.path. Every attempt's workers get it as RESUME_FROM_CHECKPOINT=<dir>/"
        "<resumeFrom>; trainingjob.sdk.resume_checkpoint() takes this run's own newest checkpoint instead once "
        "there is one.",
        pattern=RELATIVE_PATH,
        max_length=MAX_PATH_LENGTH,
        rules=[rule(f"!self.matches('{PARENT_SEGMENT}')", "checkpoint.resumeFrom must not contain '..'")],
    )
