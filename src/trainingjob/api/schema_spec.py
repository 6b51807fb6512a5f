"""The schema of TrainingJob.spec: what a user may ask for, with defaults and the checks the API server enforces.

Pod-level knobs (env, resources, scheduling, volumes, security) live in schema_pod.py, lifecycle policies
(suspend, deadlines, TTL, cleanup, success and failure policies, checkpoint storage) in schema_lifecycle.py; this
module holds the training-specific fields and the rules that span several fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainingjob.api import constants as c
from trainingjob.api.managed_by import managed_by_rules, managed_by_schema
from trainingjob.api.schema_builders import Schema, array, boolean, cel_list, integer, node, obj, rule, string
from trainingjob.api.schema_lifecycle import immutability_rules, lifecycle_fields, lifecycle_rules
from trainingjob.api.schema_pod import (
    ABSOLUTE_PATH,
    MAX_NAME_LENGTH,
    MAX_PATH_LENGTH,
    OBJECT_NAME,
    OPERATOR_MOUNTS,
    pod_fields,
)
from trainingjob.api.schema_roles import role_fields, role_rules, role_transition_rules
from trainingjob.api.schema_runtime_ref import runtime_ref_rules, runtime_ref_schema
from trainingjob.api.schema_tracking import tracking_spec
from trainingjob.api.versions import VersionShape

HYPERPARAMETER_KEY = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
MAX_HYPERPARAMETERS = 64
# Every value is copied into every worker's environment and the job's ConfigMap: a 1.2 MB value was accepted and
# copied N+1 times (issue 41). 4 KiB holds any real hyperparameter, a JSON snippet or a long path included.
MAX_HYPERPARAMETER_VALUE = 4096
# spec.model and spec.dataset are copied into every worker's environment too (MODEL, DATASET): a name or a URI.
MAX_URI_LENGTH = 2048
MAX_BACKOFF_LIMIT = 100
MIN_MASTER_PORT = 1024


def _framework(shape: VersionShape) -> Schema:
    default = f" Defaults to {shape.default_framework}." if shape.default_framework else ""
    return string(
        "The training framework: decides the launcher environment the operator injects into every worker "
        f"(one of {', '.join(c.FRAMEWORKS)}).{default} Immutable: workers of one framework cannot be turned into "
        "another.",
        enum=list(c.FRAMEWORKS),
        default=shape.default_framework,
        rules=[rule("self == oldSelf", "framework is immutable; create a new TrainingJob to change it")],
    )


def _image(shape: VersionShape) -> Schema:
    derived = (
        " If unset, the operator's admission webhook derives it from model with its --default-image pattern "
        f"({c.DEFAULT_IMAGE_PATTERN} unless the operator is told otherwise) and says so in a warning; a job naming "
        "a runtime (runtimeRef) gets the runtime's instead."
        if "image" not in shape.required
        else " Required, unless runtimeRef names a runtime that sets it."
    )
    return string(f"Container image every worker runs, e.g. registry.example/train:1.{derived}", min_length=1)


def _command(shape: VersionShape) -> Schema:
    if "command" in shape.required:
        text = (
            "Entrypoint of every worker's container (the image's ENTRYPOINT is not used). At least one element. "
            "Required, unless runtimeRef names a runtime, which may set it."
        )
    else:
        text = "Entrypoint of every worker's container; unset, the image's own ENTRYPOINT runs (as in a Pod)."
    return array(text, string("One element of the command."), min_items=1)


def _training_fields(shape: VersionShape) -> dict[str, Schema]:
    return {
        "framework": _framework(shape),
        "image": _image(shape),
        "command": _command(shape),
        "args": array(
            "Arguments appended to command in every worker (the image's CMD is not used).",
            string("One argument."),
        ),
        "model": string(
            f"Free-form name or URI of the model to train; passed to workers as MODEL (at most {MAX_URI_LENGTH} "
            "characters).",
            max_length=MAX_URI_LENGTH,
        ),
        "dataset": string(
            f"Free-form name or URI of the dataset; passed to workers as DATASET (at most {MAX_URI_LENGTH} "
            "characters).",
            max_length=MAX_URI_LENGTH,
        ),
        "hyperparameters": hyperparameters_schema(),
        "runtimeRef": runtime_ref_schema(),
    }


def hyperparameters_schema() -> Schema:
    value = node(
        None,
        "A hyperparameter value: a string, a number or a boolean, stored with its JSON type (objects and lists are "
        f"rejected; a null value is dropped). A string is at most {MAX_HYPERPARAMETER_VALUE} characters: every "
        "value is copied into every worker's environment and the job's ConfigMap.",
        preserve_unknown=True,
        max_length=MAX_HYPERPARAMETER_VALUE,
        # Bounds that no object and no list can satisfy, while strings, numbers and booleans are not affected.
        min_properties=1,
        max_properties=0,
        min_items=1,
        max_items=0,
    )
    return node(
        "object",
        "Hyperparameters handed to the training code, keyed by name: each value is a string, number or boolean "
        "and keeps its type (0.001 stays a number). The operator writes them as JSON to the file named by "
        "TRAININGJOB_HYPERPARAMETERS_FILE and as HYPERPARAM_<KEY> environment variables. Keys match "
        f"{HYPERPARAMETER_KEY} and are at most 63 characters (checked by the operator); at most "
        f"{MAX_HYPERPARAMETERS} entries.",
        max_properties=MAX_HYPERPARAMETERS,
        additional_properties=value,
    )


def _scale_fields(shape: VersionShape) -> dict[str, Schema]:
    return {
        shape.workers: integer(
            f"Number of worker pods, started and restarted together as one gang (1 to {c.MAX_WORKERS}). Also "
            "changed by `kubectl scale`; changing it restarts the gang with the new size, except with elastic, where "
            "workers are added or removed within elastic.minWorkers and maxWorkers while the others go on. "
            "Defaults to 1.",
            minimum=1,
            maximum=c.MAX_WORKERS,
            default=1,
        ),
        shape.gpus: integer(
            f"GPUs ({c.GPU_RESOURCE}) requested and limited for each worker, 0 to {c.MAX_GPUS_PER_WORKER}; "
            f"0 runs on CPU. Set GPUs here, never in resources. Defaults to {shape.default_gpus}.",
            minimum=0,
            maximum=c.MAX_GPUS_PER_WORKER,
            default=shape.default_gpus,
        ),
    }


def _data_volume() -> Schema:
    return obj(
        "A PersistentVolumeClaim with the training data, mounted into every worker; its path is passed as DATA_DIR.",
        {
            "claimName": string(
                "Name of a PersistentVolumeClaim in the job's namespace.",
                min_length=1,
                max_length=MAX_NAME_LENGTH,
                pattern=OBJECT_NAME,
            ),
            "readOnly": boolean("Mount the data read-only. Defaults to true.", default=True),
            "mountPath": string(
                f"Absolute path where the data is mounted. Defaults to {c.DEFAULT_DATA_MOUNT_PATH}; must differ "
                f"from checkpointDir, checkpoint.dir and {', '.join(OPERATOR_MOUNTS)}.",
                default=c.DEFAULT_DATA_MOUNT_PATH,
                pattern=ABSOLUTE_PATH,
                max_length=MAX_PATH_LENGTH,
                rules=[
                    rule(
                        f"!(self in {cel_list(OPERATOR_MOUNTS)})",
                        "dataVolume.mountPath must differ from the paths the operator mounts: "
                        f"{', '.join(OPERATOR_MOUNTS)}",
                    )
                ],
            ),
        },
        required=["claimName"],
    )


def _checkpoint_fields(shape: VersionShape) -> dict[str, Schema]:
    return {
        "dataVolume": _data_volume(),
        "checkpointDir": string(
            "Absolute path in every worker where training saves checkpoints and resumes from them after a restart "
            "(CHECKPOINT_DIR); checkpoint.dir overrides it. Keep checkpoints when pods are re-created with "
            "checkpoint.storage, or by mounting persistent storage there yourself (volumes and volumeMounts). "
            f"Defaults to {c.DEFAULT_CHECKPOINT_DIR}; must differ from dataVolume.mountPath.",
            default=c.DEFAULT_CHECKPOINT_DIR,
            pattern=ABSOLUTE_PATH,
            max_length=MAX_PATH_LENGTH,
        ),
        "checkpointInterval": integer(
            f"Save a checkpoint every this many epochs (CHECKPOINT_INTERVAL); checkpoint.{shape.checkpoint_interval} "
            "overrides it. At "
            "least 1, defaults to 1.",
            minimum=1,
            default=1,
        ),
    }


def _failure_fields() -> dict[str, Schema]:
    return {
        "restartPolicy": string(
            "What happens when a worker fails. OnFailure (default): restart the workers, up to backoffLimit times. "
            "Never: the job fails at the first worker failure. ExitCode: restart only for retryable exit codes "
            "(128 and above: killed by a signal, e.g. 137 OOMKilled or 143 SIGTERM) and fail at once for "
            "application errors (1-127). failurePolicy.rules take precedence; failurePolicy.restartStrategy decides "
            "which workers a restart replaces.",
            enum=list(c.RESTART_POLICIES),
            default="OnFailure",
        ),
        "backoffLimit": integer(
            f"How many times the workers may be restarted after failures before the job is marked Failed "
            f"(0 to {MAX_BACKOFF_LIMIT}, default 3); each restart waits failurePolicy.backoff first.",
            minimum=0,
            maximum=MAX_BACKOFF_LIMIT,
            default=3,
        ),
    }


def _networking(shape: VersionShape) -> Schema:
    return obj(
        "How workers reach each other. Defaults apply even when the field is omitted.",
        {
            "masterPort": integer(
                f"TCP port of the rendezvous on worker 0 (MASTER_PORT and the framework's equivalents), "
                f"{MIN_MASTER_PORT} to 65535. Defaults to {c.DEFAULT_MASTER_PORT}.",
                minimum=MIN_MASTER_PORT,
                maximum=65535,
                default=c.DEFAULT_MASTER_PORT,
            ),
            "backend": string(
                f"Collective communication backend (DISTRIBUTED_BACKEND): nccl needs GPUs ({shape.gpus} > 0), gloo "
                "runs anywhere. Unset, the operator picks nccl when the job has GPUs and gloo otherwise.",
                enum=list(c.BACKENDS),
            ),
        },
        default={},
    )


def _mount_rules() -> list[Schema]:
    """volumeMounts must name a volume the pod will have, at a path the operator does not mount itself; else
    the API server would refuse every worker pod."""
    known = (
        f"m.name in {cel_list(c.RESERVED_VOLUME_NAMES)}"
        " || (has(self.volumes) && self.volumes.exists(v, v.name == m.name))"
    )
    return [
        rule(
            f"has(self.runtimeRef) || !has(self.volumeMounts) || self.volumeMounts.all(m, {known})",
            "every volumeMounts[].name must name an entry of spec.volumes (or of the runtime's, with runtimeRef)",
            field_path=".volumeMounts",
        ),
        rule(
            f"!has(self.volumeMounts) || self.volumeMounts.all(m, !(m.mountPath in {cel_list(OPERATOR_MOUNTS)})"
            " && (!has(self.dataVolume) || m.mountPath != self.dataVolume.mountPath))",
            "volumeMounts[].mountPath must differ from the paths the operator mounts: "
            f"{', '.join(OPERATOR_MOUNTS)} and dataVolume.mountPath",
            field_path=".volumeMounts",
        ),
    ]


def _image_rule() -> Schema:
    """Where the image may be left out, it is required after admission: this rule runs after the mutating webhook,
    so it only fails when nothing derived an image, and its message says how to get one."""
    return rule(
        "has(self.image) || has(self.runtimeRef)",
        "spec.image is required: set it, or set spec.model and run the operator, whose admission webhook derives "
        f"the image from spec.model with its --default-image pattern (e.g. {c.DEFAULT_IMAGE_PATTERN}); the webhook "
        "was not reachable, has no pattern, or spec.model is unset (or name a runtime that sets one: runtimeRef)",
        field_path=".image",
    )


def _required_rules(shape: VersionShape) -> list[Schema]:
    """What a version requires of a job (its shape's `required`), unless a runtime may give it: the API server
    cannot see the runtime, so a job naming one is checked when it is admitted and planned (api/runtimes.py)."""
    return [
        rule(
            f"has(self.{field}) || has(self.runtimeRef)",
            f"spec.{field} is required unless runtimeRef names a runtime that sets it",
            field_path=f".{field}",
            reason="FieldValueRequired",
        )
        for field in shape.required
        if field != "framework"
    ]


def _cross_field_rules(shape: VersionShape) -> list[Schema]:
    """Rules that compare fields of spec with each other (each field's own limits sit on the field)."""
    gpus = shape.gpus
    return [
        rule(
            "!has(self.networking) || !has(self.networking.backend) || self.networking.backend != 'nccl'"
            f" || (has(self.{gpus}) && self.{gpus} > 0)",
            f"networking.backend nccl needs GPUs: set {gpus} > 0, use gloo, or leave backend unset",
            field_path=".networking.backend",
        ),
        rule(
            "!has(self.dataVolume) || !has(self.checkpointDir) || self.dataVolume.mountPath != self.checkpointDir",
            "dataVolume.mountPath must differ from checkpointDir: checkpoints are not written into the training data",
            field_path=".dataVolume.mountPath",
        ),
        *_mount_rules(),
        *lifecycle_rules(),
        *role_rules(shape),
        *immutability_rules(),
        *role_transition_rules(),
        *runtime_ref_rules(),
        *managed_by_rules(),
        *([] if "image" in shape.required else [_image_rule()]),
        *_required_rules(shape),
    ]


def spec_schema(shape: VersionShape, added: Mapping[str, Schema] | None = None) -> Schema:
    """TrainingJob.spec in the names and defaults of one version (api/versions.py); `added`: fields a later release
    would add (see schema.py: crd_manifest)."""
    return obj(
        "The desired training run: what to run, on how many workers with how many GPUs, with which data, and how "
        "to react to failures, suspension, deadlines and completion.",
        {
            **_training_fields(shape),
            **_scale_fields(shape),
            **_checkpoint_fields(shape),
            **_failure_fields(),
            **lifecycle_fields(shape),
            "networking": _networking(shape),
            "tracking": tracking_spec(),
            "managedBy": managed_by_schema(),
            **pod_fields(shape),
            **role_fields(shape),
            **(added or {}),
        },
        required=[field for field in shape.required if field == "framework"] or None,
        rules=_cross_field_rules(shape),
    )
