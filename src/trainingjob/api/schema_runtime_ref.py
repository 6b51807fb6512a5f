"""A TrainingJob's side of runtimes: spec.runtimeRef, which names one, and status.runtime, the runtime the operator
recorded when it first planned the job (api/runtimes.py says what each field does to the job)."""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, integer, node, obj, rule, string
from trainingjob.kube.meta import DNS_SUBDOMAIN, MAX_NAME_LENGTH


def runtime_ref_schema() -> Schema:
    return obj(
        f"A runtime this job starts from: a {c.CLUSTER_RUNTIME_KIND} (cluster-wide) or a {c.NAMESPACED_RUNTIME_KIND} "
        "in the job's namespace, defined by an admin (docs/runtimes.md). Its spec.template's fields (image, command, "
        "args, env, resources, scheduling, volumes, …) apply where this job leaves them unset: objects merge key "
        "by key and env, volumes, volumeMounts and imagePullSecrets by name, the job's own entries winning; "
        "tolerations add up. The runtime's spec.framework must be this job's framework. The operator records the "
        "runtime, its generation and its template in status.runtime when it first plans the job, and builds the "
        "job from that record from then on: editing or deleting the runtime later changes no job that has "
        "started. Immutable.",
        {
            "kind": string(
                f"{c.CLUSTER_RUNTIME_KIND} (default) or {c.NAMESPACED_RUNTIME_KIND} (in the job's namespace).",
                enum=list(c.RUNTIME_KINDS),
                default=c.CLUSTER_RUNTIME_KIND,
            ),
            "name": string("Name of the runtime.", min_length=1, max_length=MAX_NAME_LENGTH, pattern=DNS_SUBDOMAIN),
        },
        required=["name"],
        rules=[rule("self == oldSelf", "runtimeRef is immutable; create a new TrainingJob to use another runtime")],
    )


def runtime_ref_rules() -> list[Schema]:
    """A job gets or loses a runtime only by being created anew (spec-level: the field rule above sees changes of a
    runtimeRef that exists on both sides only)."""
    return [
        rule(
            "has(self.runtimeRef) == has(oldSelf.runtimeRef)",
            "runtimeRef cannot be added or removed; create a new TrainingJob to use another runtime",
            field_path=".runtimeRef",
        )
    ]


def runtime_record_schema() -> Schema:
    return obj(
        "The runtime this job started from (spec.runtimeRef), as the operator recorded it when it first planned "
        "the job; the job is built from this record, whatever happens to the runtime afterwards.",
        {
            "kind": string(f"{c.CLUSTER_RUNTIME_KIND} or {c.NAMESPACED_RUNTIME_KIND}."),
            "name": string("Name of the runtime."),
            "generation": integer("The runtime's metadata.generation when it was recorded.", minimum=0),
            "framework": string("The runtime's spec.framework."),
            "template": node(
                "object",
                "The runtime's spec.template as it was recorded (its schema is the runtime's).",
                preserve_unknown=True,
            ),
        },
    )
