"""Runtimes (pure): what a job's spec.runtimeRef names, the runtime as a job records it, and the job's effective spec
— the runtime's template under the job's own fields.

Merge rules (docs/runtimes.md), the job always winning: objects (resources, scheduling, podLabels, podAnnotations,
hyperparameters, networking, securityContext) merge key by key; lists of named entries merge by name (env, volumes,
imagePullSecrets) and volumeMounts by mountPath, the runtime's entries first; scheduling.tolerations add up;
anything else the job sets replaces the runtime's (image, command, args, serviceAccountName, scheduling.affinity).

Only fields the job's schema gives no default can come from a runtime: the API server defaults a job before anyone
reads it, so a default (workers, GPUs, restart policy, …) could not be told apart from a value the user wrote.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.status import JobStatus
from trainingjob.api.types import JobSpec, TrainingJob

# The TrainingJob.spec fields a runtime's spec.template may give (api/schema_runtime.py builds its schema from them).
TEMPLATE_FIELDS = (
    "image",
    "command",
    "args",
    "env",
    "resources",
    "scheduling",
    "serviceAccountName",
    "imagePullSecrets",
    "podLabels",
    "podAnnotations",
    "volumes",
    "volumeMounts",
    "securityContext",
    "networking",
    "hyperparameters",
)
MERGED_BY = {"env": "name", "volumes": "name", "imagePullSecrets": "name", "volumeMounts": "mountPath"}
ATOMIC = frozenset({"affinity"})  # objects the job replaces whole: half of two affinities means neither
ADDED_UP = frozenset({"tolerations"})


@dataclass(frozen=True)
class RuntimeRef:
    """spec.runtimeRef: a ClusterTrainingRuntime, or a TrainingRuntime in the job's namespace."""

    kind: str
    name: str

    @property
    def cluster_scoped(self) -> bool:
        return self.kind == k.CLUSTER_RUNTIME_KIND

    def key(self, job_namespace: str) -> tuple[str, str]:
        """(namespace, name) of the runtime: "" for a cluster-scoped one."""
        return ("" if self.cluster_scoped else job_namespace, self.name)

    def describe(self, job_namespace: str) -> str:
        return f"{self.kind} {self.name}" + ("" if self.cluster_scoped else f" in namespace {job_namespace}")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RuntimeRef | None:
        ref = spec.get("runtimeRef")
        if not isinstance(ref, Mapping) or not ref.get("name"):
            return None
        return cls(str(ref.get("kind") or k.CLUSTER_RUNTIME_KIND), str(ref["name"]))


@dataclass(frozen=True)
class RuntimeSnapshot:
    """A runtime as one job uses it: which one, its metadata.generation, its framework and its template. The
    operator records it in the job's status.runtime when it first plans the job and builds the job from the record
    from then on, so later edits of the runtime change no job that has started."""

    kind: str
    name: str
    generation: int
    framework: str
    template: Mapping[str, Any]

    @property
    def ref(self) -> RuntimeRef:
        return RuntimeRef(self.kind, self.name)

    def to_status(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "generation": self.generation,
            "framework": self.framework,
            "template": copy.deepcopy(dict(self.template)),
        }

    @classmethod
    def from_status(cls, value: Any) -> RuntimeSnapshot | None:
        if not isinstance(value, Mapping) or not value.get("name"):
            return None
        return cls(
            str(value.get("kind") or k.CLUSTER_RUNTIME_KIND),
            str(value["name"]),
            int(value.get("generation") or 0),
            str(value.get("framework") or ""),
            dict(value.get("template") or {}),
        )

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RuntimeSnapshot:
        """From a ClusterTrainingRuntime or TrainingRuntime object as the API serves it."""
        metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
        template = spec.get("template") or {}
        return cls(
            str(body.get("kind") or k.CLUSTER_RUNTIME_KIND),
            str(metadata.get("name") or ""),
            int(metadata.get("generation") or 0),
            str(spec.get("framework") or ""),
            {key: template[key] for key in TEMPLATE_FIELDS if key in template},
        )


def effective_spec(template: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The job's spec over the runtime's template (the rules in this module's docstring); shares nothing with
    either."""
    result = copy.deepcopy(dict(spec))
    for field in TEMPLATE_FIELDS:
        if field not in template:
            continue
        given = copy.deepcopy(template[field])
        if field not in result:
            result[field] = given
        elif field in MERGED_BY:
            result[field] = _merge_entries(given, result[field], MERGED_BY[field])
        elif isinstance(given, dict) and isinstance(result[field], dict):
            result[field] = _merge_objects(given, result[field])
    return result


def _merge_objects(base: dict[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in own.items():
        if key in ADDED_UP and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = merged[key] + [entry for entry in value if entry not in merged[key]]
        elif key not in ATOMIC and isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge_objects(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_entries(base: list[Any], own: list[Any], key: str) -> list[Any]:
    """The runtime's entries the job does not name again, then the job's (a job's $(VAR) may refer to a runtime's
    variable, which must come first)."""
    named = {entry.get(key) for entry in own if isinstance(entry, Mapping)}
    kept = [entry for entry in base if not (isinstance(entry, Mapping) and entry.get(key) in named)]
    return kept + copy.deepcopy(own)


def runtime_problems(snapshot: RuntimeSnapshot, framework: str, effective: Mapping[str, Any], where: str) -> list[str]:
    """Why a job cannot start from `snapshot`: another framework, or no image from either of them."""
    problems = []
    if snapshot.framework and framework and snapshot.framework != framework:
        problems.append(
            f"{where} is for {snapshot.framework} jobs, and this job's framework is {framework}: set spec.framework "
            f"to {snapshot.framework} or name another runtime"
        )
    if not effective.get("image"):
        problems.append(f"neither the job nor {where} sets an image")
    return problems


def effective_job(job: TrainingJob, snapshot: RuntimeSnapshot) -> TrainingJob:
    """`job` as it runs from `snapshot`: its effective spec, and the snapshot recorded in its status."""
    spec = effective_spec(snapshot.template, job.raw_spec)
    status = job.status.replace(runtime=snapshot.to_status())
    return dataclasses.replace(job, spec=JobSpec.from_dict(spec), raw_spec=spec, status=status)


def recorded(status: JobStatus) -> RuntimeSnapshot | None:
    """The runtime a job started from (status.runtime), if it names one."""
    return RuntimeSnapshot.from_status(status.runtime)
