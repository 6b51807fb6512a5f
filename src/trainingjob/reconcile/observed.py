"""What the operator's caches hold about a job's children, reduced to the facts the planner decides on.

Indexes store these small views instead of whole pod bodies: memory stays flat at thousands of pods, and the
planner cannot come to depend on fields it was never meant to read.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.replicas import Replica, replica_order
from trainingjob.api.runtimes import RuntimeSnapshot
from trainingjob.api.times import parse_time
from trainingjob.builders.endpoints import SliceView
from trainingjob.builders.service import ServiceView
from trainingjob.kube.phases import POD_ACTIVE, PodPhase
from trainingjob.queueing.planner import QueueDecision
from trainingjob.reconcile.surroundings import AdmissionDenial, ClaimView, NodeView
from trainingjob.scheduling.gang import GangApi, GangView
from trainingjob.scheduling.quota import NamespaceQuotas


@dataclass(frozen=True)
class PodView:
    name: str
    index: int
    attempt: int
    spec_hash: str
    phase: str
    deleting: bool = False
    node_name: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    restart_count: int = 0
    disrupted: bool = False
    unschedulable_message: str | None = None
    # Why the container cannot start yet (ErrImagePull, CreateContainerConfigError, ...), as the kubelet says.
    waiting_reason: str | None = None
    waiting_message: str | None = None
    # metadata.deletionTimestamp: the end of the grace period of a pod being deleted.
    deletion_timestamp: datetime.datetime | None = None
    uid: str = ""
    # uid of the controller ownerReference: labels anyone may copy, only the job's own pods are controlled by it.
    controller_uid: str = ""
    # The gang it joined (label ml.example.com/gang; None: placed on its own).
    gang: str | None = None
    # The DisruptionTarget condition's reason and message while True (e.g. PreemptionByScheduler).
    disruption_reason: str | None = None
    disruption_message: str | None = None
    # The pod's role (worker, chief, ps, evaluator, launcher); `index` counts within it.
    role: str = k.WORKER
    # Its address, DNS hostname and status.startTime: what its Service's EndpointSlice publishes, and since when.
    ip: str | None = None
    hostname: str | None = None
    started_at: datetime.datetime | None = None
    # Played by a simulator (kwok): it runs no code (api/constants.SIMULATED_IMAGE_ID_PREFIX).
    simulated: bool = False
    # Running with its Ready condition False: a readiness probe failing, or its node lost (the node lifecycle
    # controller marks every pod of a NotReady or unreachable node so), which only a look at the node tells apart.
    not_ready: bool = False

    @property
    def replica(self) -> Replica:
        return Replica(self.role, self.index)

    @property
    def live(self) -> bool:
        return not self.deleting

    @property
    def active(self) -> bool:
        return self.live and self.phase in POD_ACTIVE


def _terminated_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return terminated
    return {}


# Waiting reasons of a container that is simply on its way (not a problem to report).
STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})


def _waiting_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first container waiting for a reason other than being created: what keeps the worker from starting."""
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") and waiting["reason"] not in STARTING_REASONS:
            return waiting
    return {}


def _condition(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == condition_type), None)


def pod_view(body: Mapping[str, Any]) -> PodView:
    """Reduce a pod to what the planner needs (exit code and reason of a failed worker, disruption, placement)."""
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    status = body.get("status") or {}
    terminated = _terminated_state(status)
    waiting = _waiting_state(status)
    disruption = _condition(status, "DisruptionTarget")
    disrupted = bool(disruption and disruption.get("status") == "True")
    scheduled = _condition(status, "PodScheduled")
    ready = _condition(status, "Ready")
    unschedulable = (
        scheduled.get("message")
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"
        else None
    )
    return PodView(
        name=metadata.get("name", ""),
        index=int(labels.get(k.LABEL_WORKER_INDEX, -1)),
        attempt=int(labels.get(k.LABEL_ATTEMPT, -1)),
        spec_hash=labels.get(k.LABEL_SPEC_HASH, ""),
        phase=status.get("phase") or PodPhase.PENDING.value,
        deleting=metadata.get("deletionTimestamp") is not None,
        node_name=(body.get("spec") or {}).get("nodeName"),
        exit_code=terminated.get("exitCode"),
        reason=terminated.get("reason") or status.get("reason"),
        message=terminated.get("message") or status.get("message"),
        restart_count=sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or []),
        disrupted=disrupted or status.get("reason") == "Evicted",
        unschedulable_message=unschedulable,
        waiting_reason=waiting.get("reason"),
        waiting_message=waiting.get("message"),
        deletion_timestamp=parse_time(metadata.get("deletionTimestamp")),
        uid=metadata.get("uid", ""),
        controller_uid=_controller_uid(metadata),
        gang=labels.get(k.LABEL_GANG),
        disruption_reason=(disruption or {}).get("reason") if disrupted else None,
        disruption_message=(disruption or {}).get("message") if disrupted else None,
        role=labels.get(k.LABEL_ROLE) or k.WORKER,
        ip=status.get("podIP") or None,
        hostname=(body.get("spec") or {}).get("hostname"),
        started_at=parse_time(status.get("startTime")),
        simulated=any(
            str(c.get("imageID") or "").startswith(k.SIMULATED_IMAGE_ID_PREFIX)
            for c in status.get("containerStatuses") or []
        ),
        not_ready=status.get("phase") == PodPhase.RUNNING and ready is not None and ready.get("status") == "False",
    )


def _controller_uid(metadata: Mapping[str, Any]) -> str:
    owner = next((o for o in metadata.get("ownerReferences") or [] if o.get("controller")), None)
    return (owner or {}).get("uid") or ""


@dataclass(frozen=True)
class ObservedChildren:
    """A job's children as the caches see them right now."""

    pods: tuple[PodView, ...] = ()
    # Pods that were gone before a plan saw them go, as they looked when deleted: only those marked DisruptionTarget,
    # by name (operator/runtime/store.py keeps them until the name is taken again).
    departed_pods: Mapping[str, PodView] = field(default_factory=dict)
    service_exists: bool = False
    # The Service's ports as service_ports() reduces them; None: not known (nothing to compare).
    service_ports: tuple[tuple[Any, ...], ...] | None = None
    # A Service created before the operator published endpoints itself selects its pods: kube-controller-manager
    # keeps its EndpointSlices, not us (builders/endpoints.py).
    service_selects_pods: bool = False
    # The job's EndpointSlices that the operator writes, by name.
    endpoint_slices: Mapping[str, SliceView] = field(default_factory=dict)
    config_data: Mapping[str, str] | None = None
    # Messages of child writes the API server refused as invalid (e.g. a pod PodSecurity rejects).
    rejections: tuple[str, ...] = ()
    # Pods we created that the cache has not shown yet (expectations, as in the ReplicaSet controller).
    claimed_pods: frozenset[str] = frozenset()
    # uids of pods we deleted that the cache still shows alive (delete expectations).
    released_pods: frozenset[str] = frozenset()
    # The PVCs the operator created for the job, by name.
    claims: Mapping[str, ClaimView] = field(default_factory=dict)
    # The newest progress report not yet written to status (see trainingjob.progress).
    progress: Any = None
    # The namespace enforces PodSecurity `restricted`: worker defaults must include runAsNonRoot.
    namespace_restricted: bool = False
    # Creates refused by admission in the latest applies (quota, LimitRange, webhook, PriorityClass), if any.
    admission: AdmissionDenial | None = None
    # Worker names held by pods that are not the job's workers, with what holds them (reconcile/namesakes.py).
    taken_names: Mapping[str, str] = field(default_factory=dict)
    # Nodes holding pods stuck Terminating, by name (only those: nobody else needs a node's state).
    nodes: Mapping[str, NodeView] = field(default_factory=dict)
    # The gang APIs the cluster serves (scheduling/discovery.py), and the job's gang objects by name.
    gang_apis: frozenset[GangApi] = frozenset()
    gangs: Mapping[str, GangView] = field(default_factory=dict)
    # The namespace's ResourceQuotas, read while the job has workers to create (scheduling/quota.py).
    quotas: NamespaceQuotas = field(default_factory=NamespaceQuotas)
    # GPU utilisation (%) of the job's worker pods the DCGM exporters report, by pod name (gpu_telemetry.py).
    gpu_utilization: Mapping[str, float] = field(default_factory=dict)
    # The runtime spec.runtimeRef names, as the cache holds it now (None: no runtimeRef, or not cached); the job
    # uses it only until one is recorded in its status (reconcile/runtimes.py).
    runtime: RuntimeSnapshot | None = None
    # What Kueue decided for a job labelled for a LocalQueue (queueing/planner.py); None: the job is not queued.
    queue: QueueDecision | None = None

    @classmethod
    def from_cache(
        cls,
        pods: Iterable[PodView],
        services: Iterable[ServiceView],
        config_maps: Iterable[Mapping[str, str]],
        rejections: Iterable[str] = (),
        departed_pods: Iterable[PodView] = (),
        claimed_pods: Iterable[str] = (),
        released_pods: Iterable[str] = (),
        claims: Iterable[ClaimView | str] = (),
        progress: Any = None,
        gang_apis: frozenset[GangApi] = frozenset(),
        gangs: Iterable[GangView] = (),
        endpoint_slices: Iterable[SliceView] = (),
    ) -> ObservedChildren:
        config_maps, services = list(config_maps), list(services)
        return cls(
            pods=tuple(sorted(pods, key=lambda p: (*replica_order(p.replica), p.name))),
            service_exists=bool(services),
            service_ports=services[0].ports if services else None,
            service_selects_pods=bool(services) and services[0].selects_pods,
            endpoint_slices={view.name: view for view in endpoint_slices},
            config_data=config_maps[0] if config_maps else None,
            rejections=tuple(rejections),
            departed_pods={p.name: p for p in departed_pods},
            claimed_pods=frozenset(claimed_pods),
            released_pods=frozenset(released_pods),
            claims={view.name: view for view in (c if isinstance(c, ClaimView) else ClaimView(c) for c in claims)},
            progress=progress,
            gang_apis=gang_apis,
            gangs={view.name: view for view in gangs},
        )
