"""The lifecycle part of TrainingJob.spec: suspension, grace period, deadlines, TTL, cleanup, success and failure
policies, and checkpoints (schema_checkpoint.py).

schema_spec.py merges lifecycle_fields() into spec and lifecycle_rules() into its cross-field rules; each field's
own limits sit on the field, as everywhere else in the schema.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, integer, obj, rule, string
from trainingjob.api.schema_checkpoint import checkpoint_schema
from trainingjob.api.versions import VersionShape

MAX_FAILURE_RULES = 32
MAX_EXIT_CODES = 64
MAX_EXIT_CODE = 255
DEFAULT_BACKOFF_BASE_SECONDS = 10
MAX_BACKOFF_BASE_SECONDS = 3600
DEFAULT_BACKOFF_MAX_SECONDS = 300
MAX_BACKOFF_MAX_SECONDS = 86400


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
        "terminationGracePeriodSeconds": integer(
            "Seconds the workers get to stop whenever they are stopped before they finish (suspend, scale, a "
            "restart, preemption, delete): they get SIGTERM, and SIGKILL this long after. A worker that uses "
            "trainingjob.sdk.on_stop saves a checkpoint at its next safe point and exits, and status.lastStop says "
            "whether it did; the next attempt resumes from that checkpoint. Passed to the pods as their "
            "terminationGracePeriodSeconds and to the workers as TRAININGJOB_GRACE_PERIOD_SECONDS. Defaults to "
            f"{c.DEFAULT_GRACE_PERIOD_SECONDS}, as for any pod.",
            minimum=0,
            maximum=c.MAX_GRACE_PERIOD_SECONDS,
            default=c.DEFAULT_GRACE_PERIOD_SECONDS,
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


def lifecycle_fields(shape: VersionShape) -> dict[str, Schema]:
    """The spec fields that steer a job's life: suspension, time limits, completion, failures, checkpoints."""
    return {
        **_run_control_fields(),
        **_completion_fields(),
        "failurePolicy": _failure_policy(),
        "checkpoint": checkpoint_schema(shape),
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
