"""Gang scheduling behind one small interface: which gang object a job's workers form, and how a pod joins it.

A *gang* is the set of workers the scheduler must place all together or not at all. Each provider knows one
scheduler's API: the object that declares the gang (a child of the job, one per attempt that creates the whole
gang), what a worker pod carries to join it, and how the object reports whether the gang was placed.

- `NativeWorkload`: Kubernetes 1.35's Workload API (`scheduling.k8s.io/v1alpha1`, feature gates GenericWorkload +
  GangScheduling): one Workload with one pod group `workers` (`policy.gang.minCount`); pods set
  `spec.workloadRef {name, podGroup}`. Proven here against the real kube-scheduler.
- `NativePodGroup`: Kubernetes 1.36's shape (`scheduling.k8s.io/v1alpha2`): a standalone PodGroup
  (`schedulingPolicy.gang.minCount`, status condition `PodGroupScheduled`); pods set
  `spec.schedulingGroup.podGroupName`. Built to the v0.36 API types; unit-tested only (our control plane is 1.35).
- `Coscheduling`: scheduler-plugins' PodGroup (`scheduling.x-k8s.io/v1alpha1`, `minMember`, `minResources`); pods
  carry the label `scheduling.x-k8s.io/pod-group`. Unit-tested only (the plugin does not build against 1.35).
- `Volcano`: Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`, `minMember`, `minResources`, `queue`); pods carry
  the annotation `scheduling.k8s.io/group-name` and schedulerName `volcano`. Unit-tested only (not served here).

Everything here is pure; which APIs the cluster serves comes from discovery (scheduling/discovery.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.types import JobSpec, TrainingJob
from trainingjob.builders.common import child_metadata
from trainingjob.builders.pod import Membership

LABEL_GANG = k.LABEL_GANG
# The one pod group of a job's Workload (1.35): all workers share one scheduling policy.
POD_GROUP = "workers"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
MAX_NAME = 63  # the name is also a label value (ours, and coscheduling's pod-group label)


@dataclass(frozen=True)
class GangApi:
    """An API resource that declares gangs."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def __str__(self) -> str:
        return f"{self.kind} ({self.api_version})"


@dataclass(frozen=True)
class GangState:
    """What a gang object says about its placement: True placed, False not (with why), None nothing (yet)."""

    scheduled: bool | None = None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class GangView:
    """A gang object as the operator's cache keeps it."""

    provider: str
    name: str
    api_version: str = ""
    kind: str = ""
    uid: str = ""
    controller_uid: str = ""
    min_count: int = 0
    deleting: bool = False
    state: GangState = GangState()


def _condition(body: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    conditions = (body.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == condition_type), None)


class GangProvider:
    """One scheduler's gang API. Subclasses set `api` and implement the three methods that differ."""

    name = ""
    api: GangApi
    # schedulerName its members get when the job names none (None: the default scheduler).
    scheduler_name: str | None = None

    @property
    def index(self) -> str:
        """Name of the operator's cache of these objects."""
        return f"gang_{self.api.plural}_{self.api.group.split('.')[0]}_{self.api.version}"

    def gang_spec(self, job: TrainingJob, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        raise NotImplementedError

    def membership(self, gang: str) -> Membership:
        raise NotImplementedError

    def state(self, body: Mapping[str, Any]) -> GangState:
        return GangState()

    def min_count(self, spec: Mapping[str, Any]) -> int:
        return int(spec.get("minMember") or 0)

    def manifest(self, job: TrainingJob, gang: str, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        """The gang object: owned by the job (garbage collection takes it), labelled like every child."""
        return {
            "apiVersion": self.api.api_version,
            "kind": self.api.kind,
            "metadata": child_metadata(job, gang),
            "spec": self.gang_spec(job, min_count, requests),
        }

    def view(self, body: Mapping[str, Any]) -> GangView:
        """Reduce a gang object to what the planner reads (the informer's trim)."""
        metadata = body.get("metadata") or {}
        owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), {})
        return GangView(
            provider=self.name,
            name=metadata.get("name", ""),
            api_version=self.api.api_version,
            kind=self.api.kind,
            uid=metadata.get("uid", ""),
            controller_uid=owner.get("uid", ""),
            min_count=self.min_count(body.get("spec") or {}),
            deleting=metadata.get("deletionTimestamp") is not None,
            state=self.state(body),
        )


class NativeWorkload(GangProvider):
    name = "Native"
    api = GangApi("scheduling.k8s.io", "v1alpha1", "workloads", "Workload")

    def gang_spec(self, job: TrainingJob, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        return {
            "controllerRef": {"apiGroup": k.GROUP, "kind": k.KIND, "name": job.name},
            "podGroups": [{"name": POD_GROUP, "policy": {"gang": {"minCount": min_count}}}],
        }

    def membership(self, gang: str) -> Membership:
        return Membership(gang, spec={"workloadRef": {"name": gang, "podGroup": POD_GROUP}})

    def min_count(self, spec: Mapping[str, Any]) -> int:
        groups = [g for g in spec.get("podGroups") or [] if g.get("name") == POD_GROUP]
        return int(((groups[0].get("policy") or {}).get("gang") or {}).get("minCount") or 0) if groups else 0

    # A 1.35 Workload has no status: whether the gang is placed shows only on its pods.


class NativePodGroup(GangProvider):
    name = "Native"
    api = GangApi("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")

    def gang_spec(self, job: TrainingJob, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        return {"schedulingPolicy": {"gang": {"minCount": min_count}}}

    def membership(self, gang: str) -> Membership:
        return Membership(gang, spec={"schedulingGroup": {"podGroupName": gang}})

    def min_count(self, spec: Mapping[str, Any]) -> int:
        return int(((spec.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount") or 0)

    def state(self, body: Mapping[str, Any]) -> GangState:
        preempted = _condition(body, "DisruptionTarget")
        if preempted is not None and preempted.get("status") == "True":
            return GangState(False, preempted.get("reason") or "DisruptionTarget", preempted.get("message") or "")
        scheduled = _condition(body, "PodGroupScheduled")
        if scheduled is None or scheduled.get("status") not in ("True", "False"):
            return GangState()
        return GangState(scheduled["status"] == "True", scheduled.get("reason") or "", scheduled.get("message") or "")


class Coscheduling(GangProvider):
    name = "Coscheduling"
    api = GangApi("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
    # The second scheduler that scheduler-plugins' Helm chart installs, with coscheduling enabled.
    scheduler_name = "scheduler-plugins-scheduler"
    PLACED = ("Scheduled", "Running", "Finished")

    def gang_spec(self, job: TrainingJob, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        body: dict[str, Any] = {"minMember": min_count}
        if requests:
            body["minResources"] = dict(requests)
        return body

    def membership(self, gang: str) -> Membership:
        return Membership(gang, labels={COSCHEDULING_LABEL: gang}, spec={"schedulerName": self.scheduler_name})

    def state(self, body: Mapping[str, Any]) -> GangState:
        phase = (body.get("status") or {}).get("phase")
        if not phase:
            return GangState()
        return GangState(phase in self.PLACED, phase, f"PodGroup phase {phase}")


class Volcano(GangProvider):
    name = "Volcano"
    api = GangApi("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
    scheduler_name = "volcano"

    def gang_spec(self, job: TrainingJob, min_count: int, requests: Mapping[str, str]) -> dict[str, Any]:
        scheduling = job.spec.scheduling
        body: dict[str, Any] = {"minMember": min_count, "queue": scheduling.gang.queue or "default"}
        if requests:
            body["minResources"] = dict(requests)
        if scheduling.priority_class_name:
            body["priorityClassName"] = scheduling.priority_class_name
        return body

    def membership(self, gang: str) -> Membership:
        return Membership(gang, annotations={VOLCANO_ANNOTATION: gang}, spec={"schedulerName": self.scheduler_name})

    def state(self, body: Mapping[str, Any]) -> GangState:
        unschedulable = _condition(body, "Unschedulable")
        if unschedulable is not None and unschedulable.get("status") == "True":
            return GangState(False, unschedulable.get("reason") or "Unschedulable", unschedulable.get("message") or "")
        phase = (body.get("status") or {}).get("phase")
        if not phase:
            return GangState()
        return GangState(phase in ("Running", "Completed"), phase, f"PodGroup phase {phase}")


# Newest native API first: a cluster serving both gets the newer one.
PROVIDERS: tuple[GangProvider, ...] = (NativePodGroup(), NativeWorkload(), Coscheduling(), Volcano())
DEFAULT_SCHEDULERS = ("", "default-scheduler")


def watched(served: frozenset[GangApi]) -> list[GangProvider]:
    """The providers whose objects the operator caches (each in the index `provider.index`): those served."""
    return [p for p in PROVIDERS if p.api in served]


def provider_for(api_version: str, kind: str) -> GangProvider | None:
    return next((p for p in PROVIDERS if (p.api.api_version, p.api.kind) == (api_version, kind)), None)


@dataclass(frozen=True)
class GangChoice:
    """The gang a job's workers form here: its provider (None: placed one by one) and minimum size; `unavailable`
    says why a gang the spec asks for cannot be had on this cluster (no workers are created then)."""

    provider: GangProvider | None = None
    min_count: int = 0
    unavailable: str | None = None


def _served(name: str, served: frozenset[GangApi]) -> GangProvider | None:
    return next((p for p in PROVIDERS if p.name == name and p.api in served), None)


def gang_members(spec: JobSpec) -> dict[str, int]:
    """Pods of each role the gang must place together (its minCount is their sum): every pod of the other roles
    (chief, parameter servers, evaluator, MPI launcher: a gang counts pods, not roles, so a role left out could be
    the pod left unplaced) plus the workers' minimum: spec.scheduling.gang.minCount, else elastic.minWorkers for an
    elastic job (it starts with fewer, and later workers join the running gang), else all of them; never more than
    spec.workers."""
    workers = spec.workers
    wanted = spec.scheduling.gang.min_count or (spec.elastic.min_workers if spec.elastic is not None else workers)
    members = {role: spec.replicas_of(role) for role in k.ROLES if role != k.WORKER and spec.replicas_of(role) > 0}
    return {**members, k.WORKER: min(wanted, workers)}


def choose(job: TrainingJob, served: frozenset[GangApi]) -> GangChoice:
    """The provider for `job` on a cluster serving `served` (see docs/trainingjob.md#gang-scheduling).

    Auto (the default) gangs any job whose gang (gang_members) has two or more pods with the API its scheduler
    reads: Volcano's for schedulerName `volcano`, the native Workload API for the default scheduler, coscheduling's
    for any other scheduler when its API is served; otherwise the pods are placed one by one, as without gang
    scheduling.
    A provider named explicitly that the cluster does not serve is `unavailable`: the job waits, Blocked.
    """
    spec = job.spec.scheduling
    wanted = spec.gang.provider
    min_count = sum(gang_members(job.spec).values())
    if wanted == "Disabled":
        return GangChoice()
    if wanted != "Auto":
        provider = _served(wanted, served)
        if provider is not None:
            return GangChoice(provider, min_count)
        apis = " or ".join(str(p.api) for p in PROVIDERS if p.name == wanted)
        return GangChoice(
            None,
            min_count,
            f"spec.scheduling.gang.provider {wanted} needs {apis}, which this cluster does not serve (the operator "
            "reads the served APIs when it starts: restart it after installing or enabling one)",
        )
    if min_count < 2:
        return GangChoice()
    scheduler = spec.scheduler_name or ""
    if scheduler == Volcano.scheduler_name:
        candidate = "Volcano"
    elif scheduler in DEFAULT_SCHEDULERS:
        candidate = "Native"
    else:
        candidate = "Coscheduling"
    return GangChoice(_served(candidate, served), min_count)


def gang_name(job_name: str, attempt: int) -> str:
    """The gang object formed by `attempt`: deterministic, so creating it twice meets AlreadyExists."""
    name = f"{job_name}-gang-{attempt}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(job_name.encode()).hexdigest()[:8]
    suffix = f"-{digest}-gang-{attempt}"
    return job_name[: MAX_NAME - len(suffix)].rstrip("-") + suffix
