"""The lifecycle part of TrainingJob.spec: suspension, deadlines, TTL, cleanup, success and failure policies, and
checkpoint storage the operator mounts (and may create).

schema_spec.py merges lifecycle_fields() into spec and lifecycle_rules() into its cross-field rules; each field's
own limits sit on the field, as everywhere else in the schema.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, cel_list, integer, node, obj, rule, string
from trainingjob.api.schema_pod import ABSOLUTE_PATH, MAX_NAME_LENGTH, MAX_PATH_LENGTH, OPERATOR_MOUNTS, QUANTITY
from trainingjob.api.versions import VersionShape

CHECKPOINT_CLAIM = "<job>-checkpoints"
MAX_FAILURE_RULES = 32
MAX_EXIT_CODES = 64
MAX_EXIT_CODE = 255
DEFAULT_BACKOFF_BASE_SECONDS = 10
MAX_BACKOFF_BASE_SECONDS = 3600
DEFAULT_BACKOFF_MAX_SECONDS = 300
MAX_BACKOFF_MAX_SECONDS = 86400
DEFAULT_ACCESS_MODES = ["ReadWriteMany"]
# An object-store URI: s3://bucket/prefix or gs://bucket/prefix (bucket names as both stores allow them).
OBJECT_STORE_URI = r"^(s3|gs)://[a-z0-9][a-z0-9._-]{1,61}[a-z0-9](/[^\s]*)?$"
URI_SCHEMES = {"s3": "s3://", "gcs": "gs://"}


def _run_control_fields() -> dict[str, Schema]:
    return {
        "suspend": boolean(
            "Suspend the job: true deletes the workers and keeps the job (its Service, ConfigMap and checkpoint "
            "PVC stay) in phase Suspended; false resumes it with a new attempt of workers (RESUME_FROM_CHECKPOINT "
            "true once training had started). A job created with true waits without workers; a job queued in Kueue "
            "(label kueue.x-k8s.io/queue-name) has its Workload deactivated while suspended. Time suspended "
            "(status.suspendedSeconds) does not count against activeDeadlineSeconds. Defaults to false.",
            default=False,
        ),
        "activeDeadlineSeconds": integer(
            "Seconds the job may be active, counted from its first start (status.startTime) with the time spent "
            "suspended left out; restarts and their backoff delays count. When it is reached the workers are "
            "deleted and the job is Failed with reason DeadlineExceeded. At least 1; unset: no limit.",
            minimum=1,
        ),
        "startupTimeoutSeconds": integer(
            "Seconds each attempt's workers may take, from their creation (status.attemptStartTime), until all of "
            "them are Running, e.g. while they are unschedulable or pulling images. When it is exceeded the "
            "workers are deleted and the job is Failed with reason StartupTimeout (no restart). The clock starts "
            "again with every attempt; a restart's backoff delay does not count. While they wait, the condition "
            "Blocked says why (image pull, container config, unschedulable, admission denial). At least 1; unset: "
            "wait forever (a gang admission refuses gives its pods back meanwhile; one that cannot start keeps them).",
            minimum=1,
        ),
        "ttlSecondsAfterFinished": integer(
            "Seconds after the job Succeeded or Failed (status.completionTime) at which the operator deletes the "
            "TrainingJob; garbage collection then removes everything it owns (Service, ConfigMap, remaining pods, "
            "and the checkpoint PVC when checkpoint.deleteOnCompletion is true). 0 deletes it as soon as it "
            "finishes; unset keeps it until it is deleted by hand.",
            minimum=0,
        ),
    }


def _completion_fields() -> dict[str, Schema]:
    return {
        "cleanPodPolicy": string(
            "Which worker pods are deleted when the job finishes, however it finishes (succeeded, failed, "
            "deadline or startup timeout exceeded). Running (default): the pods still pending or running; finished "
            "pods stay for their logs. All: every worker pod. None: no pod. Once the job has Succeeded, pods still "
            "running have nothing left to do and are deleted in any case (workers after successPolicy Rank0; "
            "parameter servers, an evaluator, MPI workers after the chief or launcher).",
            enum=list(c.CLEAN_POD_POLICIES),
            default="Running",
        ),
        "successPolicy": string(
            "When the job has Succeeded. AllWorkers (default): once every worker succeeded. Rank0: as soon as "
            "worker 0 succeeded; the other workers are then deleted. A job with roles.chief or roles.launcher, or "
            "with elastic, is judged by that pod (chief 0, launcher 0, worker 0) whatever this says.",
            enum=list(c.SUCCESS_POLICIES),
            default="AllWorkers",
        ),
    }


def _failure_rule() -> Schema:
    return obj(
        "What to do when a worker's container exits with one of exitCodes.",
        {
            "exitCodes": array(
                f"Exit codes this rule matches, 0 to {MAX_EXIT_CODE} (128 + n: killed by signal n, e.g. 137 "
                f"OOMKilled); 1 to {MAX_EXIT_CODES} codes.",
                integer("An exit code.", minimum=0, maximum=MAX_EXIT_CODE),
                min_items=1,
                max_items=MAX_EXIT_CODES,
            ),
            "action": string(
                "Restart: restart the workers (per restartStrategy, after the backoff delay), counting against "
                "backoffLimit. Fail: the job fails at once. Ignore: treat that worker as finished; the others go "
                "on.",
                enum=list(c.FAILURE_ACTIONS),
            ),
        },
        required=["exitCodes", "action"],
    )


def _backoff() -> Schema:
    return obj(
        "Delay before each restart after a failure, growing exponentially: the delay before restart n is "
        "min(baseSeconds * 2^(n-1), maxSeconds) seconds (10, 20, 40, ... capped at 300 with the defaults); "
        "status.nextRestartTime tells when the pending restart creates the workers. Defaults apply even when the "
        "field is omitted.",
        {
            "baseSeconds": integer(
                f"Delay before the first restart, in seconds, 1 to {MAX_BACKOFF_BASE_SECONDS}. Defaults to "
                f"{DEFAULT_BACKOFF_BASE_SECONDS}.",
                minimum=1,
                maximum=MAX_BACKOFF_BASE_SECONDS,
                default=DEFAULT_BACKOFF_BASE_SECONDS,
            ),
            "maxSeconds": integer(
                f"Longest delay, in seconds, 1 to {MAX_BACKOFF_MAX_SECONDS}; at least baseSeconds. Defaults to "
                f"{DEFAULT_BACKOFF_MAX_SECONDS}.",
                minimum=1,
                maximum=MAX_BACKOFF_MAX_SECONDS,
                default=DEFAULT_BACKOFF_MAX_SECONDS,
            ),
        },
        default={},
        rules=[
            rule(
                "!has(self.baseSeconds) || !has(self.maxSeconds) || self.maxSeconds >= self.baseSeconds",
                "failurePolicy.backoff.maxSeconds must be at least baseSeconds (which defaults to "
                f"{DEFAULT_BACKOFF_BASE_SECONDS})",
                field_path=".maxSeconds",
            )
        ],
    )


def _failure_policy() -> Schema:
    return obj(
        "How failed workers are restarted. Disruptions (eviction, preemption, node loss) are always restarted "
        "and count neither against backoffLimit nor against rules. Defaults apply even when the field is omitted.",
        {
            "restartStrategy": string(
                "Which workers a restart replaces. Gang (default): delete and recreate every worker, which is what "
                "NCCL and rendezvous-based training need. Worker: replace only the failed (or disrupted) pod; for "
                "training that tolerates a worker rejoining.",
                enum=list(c.RESTART_STRATEGIES),
                default="Gang",
            ),
            "rules": array(
                "Actions by exit code; they take precedence over restartPolicy. The first rule whose exitCodes "
                "contains the failed worker's exit code decides; a failure no rule matches is handled by "
                f"restartPolicy. Ignore treats that worker as finished. At most {MAX_FAILURE_RULES} rules.",
                _failure_rule(),
                max_items=MAX_FAILURE_RULES,
            ),
            "backoff": _backoff(),
        },
        default={},
    )


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


def _checkpoint(shape: VersionShape) -> Schema:
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
                "Absolute path in every worker where checkpoints are saved and storage is mounted (CHECKPOINT_DIR). "
                f"Defaults to spec.checkpointDir; must differ from dataVolume.mountPath and from "
                f"{', '.join(OPERATOR_MOUNTS)}.",
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
                "How many of the newest checkpoints the training code should keep (CHECKPOINT_KEEP_LAST); the "
                "operator deletes none itself. At least 1; unset: the variable is not set and the training code "
                "decides.",
                minimum=1,
            ),
            "deleteOnCompletion": boolean(
                f"Whether the PVC {CHECKPOINT_CLAIM} the operator creates for storage.size goes with the job. "
                "false (default): it has no owner and outlives the job, so a new job of the same name resumes from "
                "it or a server loads the model; delete it by hand. true: it is owned by the TrainingJob and "
                "garbage-collected when the job is deleted (by hand or by ttlSecondsAfterFinished). Read when the "
                "PVC is created, so it cannot change once storage is set. A claimName PVC is never deleted.",
                default=False,
            ),
            "storage": _storage(),
        },
        rules=[
            rule(
                "!has(self.enabled) || !self.enabled || has(self.storage)",
                _needs_storage_message(shape),
            )
        ],
    )


def lifecycle_fields(shape: VersionShape) -> dict[str, Schema]:
    """The spec fields that steer a job's life: suspension, time limits, completion, failures, checkpoints."""
    return {
        **_run_control_fields(),
        **_completion_fields(),
        "failurePolicy": _failure_policy(),
        "checkpoint": _checkpoint(shape),
    }


def _checkpoint_path() -> str:
    """CEL for the directory checkpoints are mounted at: checkpoint.dir, else checkpointDir (always defaulted)."""
    return (
        "(has(self.checkpoint.dir) ? self.checkpoint.dir : "
        f"has(self.checkpointDir) ? self.checkpointDir : '{c.DEFAULT_CHECKPOINT_DIR}')"
    )


def _delete_on_completion(which: str) -> str:
    field = f"{which}.checkpoint.deleteOnCompletion"
    return f"(has({field}) && {field})"


def immutability_rules() -> list[Schema]:
    """Transition rules: changes a job cannot honour once made. The API server enforces them on every update,
    whether or not the operator (and its webhooks) run."""
    had_storage = "has(oldSelf.checkpoint) && has(oldSelf.checkpoint.storage)"
    has_storage = "has(self.checkpoint) && has(self.checkpoint.storage)"
    return [
        rule(
            f"!({had_storage}) || ({has_storage} && self.checkpoint.storage == oldSelf.checkpoint.storage)",
            "checkpoint.storage cannot change or be removed once set: it holds this job's checkpoints (and a PVC "
            "the operator created stays as it was made); create a new TrainingJob for other storage",
            field_path=".checkpoint.storage",
        ),
        rule(
            f"!({had_storage}) || !has(self.checkpoint) || {_delete_on_completion('self')} == "
            f"{_delete_on_completion('oldSelf')}",
            "checkpoint.deleteOnCompletion cannot change once checkpoint.storage is set: it was read when the "
            "checkpoint PVC was created",
            field_path=".checkpoint.deleteOnCompletion",
        ),
    ]


def lifecycle_rules() -> list[Schema]:
    """Rules on spec that compare the lifecycle fields with the rest of spec."""
    return [
        rule(
            "!has(self.checkpoint) || !has(self.checkpoint.dir) || !has(self.dataVolume)"
            " || self.checkpoint.dir != self.dataVolume.mountPath",
            "checkpoint.dir must differ from dataVolume.mountPath: checkpoints are not written into the training data",
            field_path=".checkpoint.dir",
        ),
        rule(
            "!has(self.checkpoint) || !has(self.checkpoint.enabled) || !self.checkpoint.enabled"
            f" || !has(self.volumeMounts) || self.volumeMounts.all(m, m.mountPath != {_checkpoint_path()})",
            "volumeMounts[].mountPath must differ from the checkpoint directory (checkpoint.dir, else "
            "checkpointDir) while checkpoint.enabled: the operator mounts checkpoint.storage there",
            field_path=".volumeMounts",
        ),
    ]
