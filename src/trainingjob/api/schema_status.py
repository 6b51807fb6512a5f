"""The schema of TrainingJob.status, written only by the operator.

It is fully typed (no x-kubernetes-preserve-unknown-fields), so a status the operator misspells is pruned or
rejected instead of silently stored, and `kubectl explain` documents every field users read.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, array, boolean, integer, node, obj, string
from trainingjob.api.schema_progress import last_checkpoint, last_stop, progress
from trainingjob.api.schema_runtime_ref import runtime_record_schema
from trainingjob.api.schema_tracking import tracking_status

# metav1.Condition's own limits, so conditions written with the standard helpers always fit.
CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _timestamp(description: str) -> Schema:
    return string(description, format="date-time")


def _condition() -> Schema:
    return obj(
        "One aspect of the job's state, in the standard metav1.Condition shape.",
        {
            "type": string(
                "Condition type in CamelCase: Queued (waiting for Kueue to admit it, see status.queue), Running, "
                "GangScheduled (the current gang is placed; only for a gang, "
                "see status.gang), Blocked (something keeps the workers from running: a worker that cannot start "
                "or be scheduled, admission refusing them, a worker's name held by a pod that is not its worker, a "
                "pod stuck Terminating, a Pending checkpoint PVC, a gang API the cluster does not serve), Restarting, "
                "Suspended, Succeeded, Failed.",
                pattern=CONDITION_TYPE,
                max_length=316,
            ),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string(
                "Machine-readable CamelCase reason for the last transition, e.g. InvalidSpec, BackoffLimitExceeded, "
                "DeadlineExceeded, StartupTimeout or JobSuspended; for Blocked the kubelet's waiting reason "
                "(ImagePullBackOff, CreateContainerConfigError, InvalidImageName, ...), Unschedulable, "
                "AdmissionDenied, PodNameTaken, PodStuckTerminating, NodeNotReady, CheckpointVolumePending or "
                "GangSchedulingUnavailable; for "
                "GangScheduled the reason of status.gang.",
                pattern=CONDITION_REASON,
                min_length=1,
                max_length=1024,
            ),
            "message": string("Human-readable details of the last transition.", max_length=32768),
            "lastTransitionTime": _timestamp("When status last changed."),
            "observedGeneration": integer(
                "metadata.generation of the spec this condition was computed from.", minimum=0
            ),
        },
        required=["type", "status", "reason", "message", "lastTransitionTime"],
    )


def _role_field(what: str) -> Schema:
    *others, last = [role.name for role in c.EXTRA_ROLES]
    return string(
        f"Role of the {what} when it is not a worker: {', '.join(others)} or {last} (spec.roles); absent for workers.",
        enum=[role for role in c.ROLES if role != c.WORKER],
    )


def _worker_status() -> Schema:
    return obj(
        "The observed state of one pod of the job (a worker unless role says otherwise).",
        {
            "workerId": integer(
                "Index of the pod within its role: for workers 0 to workers-1 (its RANK); worker 0 is the master.",
                minimum=0,
            ),
            "role": _role_field("pod"),
            "podName": string("Name of the worker's current pod."),
            "phase": string(
                "Phase of the pod: Pending, Running, Succeeded, Failed or Unknown; NotCreated when admission "
                "refused to create it (reason AdmissionDenied)."
            ),
            "restartCount": integer("Container restarts of this worker in the current attempt.", minimum=0),
            "exitCode": integer("Exit code of the worker's container once it terminated."),
            "reason": string(
                "Why the pod or its container is in this phase, e.g. OOMKilled or Evicted, or why it cannot start: "
                "the container's waiting reason (ErrImagePull, CreateContainerConfigError, ...) or Unschedulable."
            ),
            "message": string("Human-readable details from the pod or its container."),
            "nodeName": string("Node the pod is bound to."),
        },
        required=["workerId"],
    )


def _role_statuses() -> Schema:
    def count(what: str) -> Schema:
        return integer(what, minimum=0)

    role = obj(
        "The pods of one role.",
        {
            "replicas": count("Pods of this role the job wants (the worker count, or spec.roles.<role>.replicas)."),
            "pending": count("Pods of this role that are Pending."),
            "running": count("Pods of this role that are Running."),
            "succeeded": count("Pods of this role that Succeeded."),
            "failed": count("Pods of this role that Failed and were not replaced yet."),
        },
    )
    return obj(
        "Per role, how many pods the job wants and in which phase its current pods are; present for jobs with "
        "spec.roles or spec.elastic.",
        {name: role for name in c.ROLES},
    )


def _counters() -> dict[str, Schema]:
    return {
        "observedGeneration": integer("metadata.generation of the spec the operator last acted on.", minimum=0),
        "workers": integer("Worker pods that currently exist (the scale subresource's status.replicas).", minimum=0),
        "restartCount": integer(
            "Times the workers were restarted because of failures; compared with spec.backoffLimit.", minimum=0
        ),
        "disruptionCount": integer(
            "Times the workers were restarted because of disruptions (eviction, preemption, node loss) rather "
            "than failures of the training code.",
            minimum=0,
        ),
        "attempt": integer(
            "How many times the gang of workers has been (re)created: 0 for the first set of pods.", minimum=0
        ),
    }


def _last_failure() -> Schema:
    return obj(
        "The most recent worker failure that made the operator restart the workers or fail the job; kept after "
        "the pod is gone so the cause stays visible.",
        {
            "workerId": integer("Index of the pod that failed within its role (a worker's RANK).", minimum=0),
            "role": _role_field("pod that failed"),
            "podName": string("Name of the pod that failed."),
            "exitCode": integer("Exit code of the worker's container, when it terminated with one."),
            "reason": string("Why the pod or its container failed, e.g. Error or OOMKilled."),
            "message": string("Human-readable details from the pod or its container."),
            "time": _timestamp("When the operator saw the failure."),
        },
    )


def _gang() -> Schema:
    return obj(
        "The gang the current workers form (spec.scheduling.gang): absent when they are placed one by one.",
        {
            "provider": string("Native, Coscheduling or Volcano."),
            "apiVersion": string("API version of the gang object, e.g. scheduling.k8s.io/v1alpha1."),
            "kind": string("Kind of the gang object: Workload or PodGroup."),
            "name": string("Name of the gang object, <job>-gang-<attempt that formed it>; a child of the job."),
            "minCount": integer("Workers that must fit together before the scheduler binds any.", minimum=0),
            "placed": integer("Workers of this gang bound to a node.", minimum=0),
            "state": string(
                "Scheduled (minCount workers are placed) or Waiting (see reason and message).",
                enum=["Scheduled", "Waiting"],
            ),
            "reason": string(
                "Why, in CamelCase: GangScheduled; while Waiting WorkersPending (not all workers exist yet), "
                "Scheduling, Unschedulable (a worker does not fit: the scheduler's message), GangPending, "
                "GangSchedulingUnavailable, or the gang object's own reason (a PodGroup's status)."
            ),
            "message": string("Human-readable details: how many workers are placed, and why the rest are not."),
        },
    )


def _resources() -> Schema:
    return obj(
        "What the job holds now (seed 002's status.resources): its workers' GPUs and nodes, and how busy the GPUs "
        "are, from the cluster's DCGM exporters (docs/trainingjob.md, GPU telemetry). Absent before any worker is "
        "placed.",
        {
            "allocatedGPUs": integer(
                "GPUs (nvidia.com/gpu) of the workers bound to a node and not finished.", minimum=0
            ),
            "allocatedNodes": integer("Nodes those workers are on.", minimum=0),
            "gpuUtilization": node(
                "number",
                "Average utilization of those GPUs in percent (0-100), over the workers the exporters report; "
                "updated when it moves by 5 points or more. Absent while no exporter reports them.",
                minimum=0,
                maximum=100,
            ),
            "gpuIdleSince": _timestamp(
                "Since when every reported GPU of the job has stayed below the operator's idle threshold "
                "(--idle-gpu-threshold, default 5 %); absent while they are busy or unreported."
            ),
        },
    )


def _lifecycle() -> dict[str, Schema]:
    return {
        "attemptStartTime": _timestamp(
            "When the current attempt's workers were first created; spec.startupTimeoutSeconds counts from here. "
            "Absent while no attempt's workers exist (restart backoff, suspension)."
        ),
        "nextRestartTime": _timestamp(
            "When the operator will create the workers again, once a backoff delay (spec.failurePolicy.backoff) is "
            "over: after a restart, or after admission refused to create them (condition Blocked, reason "
            "AdmissionDenied); absent when nothing is waiting."
        ),
        "workerSpec": obj(
            "The spec generation the current workers were built from. A spec change is judged by "
            "metadata.generation: defaults the API server adds (a CRD or operator upgrade) never restart workers, "
            "and an edit restarts them only if it changes what shapes them.",
            {
                "generation": integer("metadata.generation the current workers were built for.", minimum=0),
                "podSpecHash": string("The ml.example.com/spec-hash label of the current workers."),
                "specHash": string(
                    "Fingerprint of that generation's spec (defaults and policy fields left out), compared with "
                    "the next generation's to tell whether an edit changes the workers."
                ),
            },
        ),
        "lastFailure": _last_failure(),
        "replacedPods": array(
            "uids of the pods the current restart replaces whose deletion is not yet seen. Their failure or "
            "disruption is already counted, so until they are gone they are only deleted, never counted again.",
            string("A pod uid."),
        ),
        "suspendTime": _timestamp("When the job was suspended (spec.suspend); present only while it is suspended."),
        "suspendedSeconds": integer(
            "Total seconds the job has spent suspended after it first started (startTime), over all suspensions; "
            "left out of spec.activeDeadlineSeconds. Time queued before the first start is not counted.",
            minimum=0,
        ),
        "lastCheckpoint": last_checkpoint(),
        "lastStop": last_stop(),
        "progress": progress(),
        "gang": _gang(),
        "resources": _resources(),
        "queue": _queue(),
    }


def _queue() -> Schema:
    return obj(
        "Where the job waits or runs in Kueue: present for a job labelled kueue.x-k8s.io/queue-name. The operator "
        "creates a Kueue Workload for it and runs its workers only while Kueue admits it (phase Queued otherwise).",
        {
            "name": string("The LocalQueue (the job's kueue.x-k8s.io/queue-name label).", max_length=253),
            "workload": string("The job's Workload (workloads.kueue.x-k8s.io) in the job's namespace.", max_length=253),
            "clusterQueue": string("The ClusterQueue that admitted the Workload (or last did).", max_length=253),
            "admitted": node("boolean", "Whether Kueue admits the Workload now, so the workers may run."),
            "reason": string(
                "Admitted, or why the job waits: Pending or Inadmissible (Kueue's own reason: no quota now, a "
                "LocalQueue that does not exist, a request larger than the ClusterQueue can give), Preempted or "
                "Evicted<Kueue's reason> (its workers were stopped, the checkpoint kept), KueueNotInstalled, "
                "PriorityClassNotFound, Suspended.",
                max_length=128,
            ),
            "message": string(
                "Kueue's message (or ours) for the reason, truncated to 1024 characters.", max_length=1024
            ),
            "queuedSince": _timestamp("When the current wait began; absent while admitted."),
            "queuedSeconds": integer("Seconds the job has waited in the queue, over all its waits.", minimum=0),
            "admittedTime": _timestamp("When Kueue last admitted the job."),
            "admittedWorkers": integer(
                "Set while an elastic job runs with fewer workers than it asks for because Kueue admitted it "
                "partially (its quota had room for no more; never below elastic.minWorkers): the workers it runs "
                "with. Absent when Kueue admitted all of them.",
                minimum=0,
            ),
        },
    )


def status_schema() -> Schema:
    """TrainingJob.status."""
    return obj(
        "The observed state of the job, written by the operator.",
        {
            "phase": string(
                f"Summary of the job's lifecycle: one of {', '.join(c.PHASES)}.",
                enum=list(c.PHASES),
            ),
            "conditions": array(
                "Detailed state of the job, one entry per condition type.",
                _condition(),
                list_type="map",
                list_map_keys=["type"],
            ),
            "startTime": _timestamp(
                "When the job first reached Running (all workers running); spec.activeDeadlineSeconds counts from here."
            ),
            "completionTime": _timestamp("When the job reached Succeeded or Failed."),
            "workerStatuses": array(
                f"The observed state of each pod, by role ({', '.join(c.ROLES)}) and workerId.",
                _worker_status(),
            ),
            "roleStatuses": _role_statuses(),
            "selector": string(
                "Label selector of the job's worker pods, in string form (the scale subresource's selector)."
            ),
            **_counters(),
            **_lifecycle(),
            "message": string("Human-readable summary of the current phase, e.g. why the job failed."),
            "simulated": boolean(
                "True once a worker of the job ran on a simulated node (kwok on the local cluster): such a worker "
                "runs no code, so its phase and any progress are a simulation's, not a training's. tj and the UI "
                "label the job simulated."
            ),
            "tracking": tracking_status(),
            "runtime": runtime_record_schema(),
        },
    )


def _state() -> Schema:
    return string(
        "Summary of the job's lifecycle in the guide's words: Pending (no worker pod yet), Initializing (worker pods "
        "created, not all running), Running, Restarting (a restart after a failure or disruption is in progress), "
        "Completed, Failed, Suspended or Queued (waiting for Kueue). v1alpha1's phase, with Succeeded called "
        "Completed and Pending split by whether pods exist.",
        enum=list(c.STATES),
    )


def _progress_details() -> Schema:
    """v1alpha1's progress object without the fields v1 shows at the top of status."""
    details = progress()
    details["description"] = (
        "Details of the training progress the chief worker reports (docs/progress-protocol.md); currentEpoch, "
        "totalEpochs and metrics sit at the top of status."
    )
    details["properties"] = {
        name: schema
        for name, schema in details["properties"].items()
        if name not in ("epoch", "totalEpochs", "metrics")
    }
    return details


def status_schema_v1() -> Schema:
    """TrainingJob.status of v1: the guide's state, progress, currentEpoch, totalEpochs and metrics, and every other
    field of v1alpha1's status under its own name (api/conversion.py maps them)."""
    v1alpha1 = status_schema()["properties"]
    progress_fields = progress()["properties"]
    fields = {name: schema for name, schema in v1alpha1.items() if name not in ("phase", "progress")}
    return obj(
        "The observed state of the job, written by the operator.",
        {
            "state": _state(),
            "progress": string(
                'Training progress in percent as text, e.g. "45%" (progressDetails.percent, rounded down).'
            ),
            "currentEpoch": integer("Current training epoch, as the chief worker reports it.", minimum=0),
            "totalEpochs": progress_fields["totalEpochs"],
            "metrics": progress_fields["metrics"],
            "progressDetails": _progress_details(),
            **fields,
        },
    )
