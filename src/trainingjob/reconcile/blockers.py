"""Why a job's workers cannot all run, found in what the caches hold: the `Blocked` condition, status.message, a
Warning Event, and which pods the stuck-pod policy force-deletes.

Every finding is a Blocker: the reason (the condition's and the Event's), the worker or child it is about, and a
sentence for people. The first one (by role and index) becomes the condition; status.message counts the others.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainingjob.api.names import pod_name
from trainingjob.api.replicas import Replica, desired_replicas, replica_order
from trainingjob.api.times import format_time
from trainingjob.api.types import TrainingJob
from trainingjob.kube.phases import POD_ACTIVE, ClaimPhase
from trainingjob.planning.actions import Event
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.reconcile.surroundings import AdmissionDenial, ClaimView, NodeView

BLOCKED = "Blocked"
# The kubelet alternates these two while it retries a pull; to a user they are one state.
REASON_ALIASES = {"ErrImagePull": "ImagePullBackOff"}
NON_ROOT_HINT = (
    " (workers run with runAsNonRoot, because the namespace enforces PodSecurity restricted or spec.securityContext"
    " asks for it: use an image whose USER is a numeric non-root uid, or set spec.securityContext.runAsUser)"
)


@dataclass(frozen=True)
class Blocker:
    reason: str
    subject: str
    detail: str

    @property
    def message(self) -> str:
        return f"{self.subject} {self.detail}"


def subject(pod: PodView) -> str:
    return f"{pod.role} {pod.index} (pod {pod.name})"


def worker_blockers(current: Mapping[Replica, PodView]) -> list[Blocker]:
    """Pods the kubelet cannot start (image, config, runAsNonRoot...) or the scheduler cannot place."""
    found = []
    for replica in sorted(current, key=replica_order):
        pod = current[replica]
        if pod.deleting or pod.phase not in POD_ACTIVE:
            continue
        if pod.waiting_reason:
            reason = REASON_ALIASES.get(pod.waiting_reason, pod.waiting_reason)
            message = f": {pod.waiting_message}" if pod.waiting_message else ""
            hint = NON_ROOT_HINT if "runAsNonRoot" in (pod.waiting_message or "") else ""
            found.append(Blocker(reason, subject(pod), f"cannot start: {pod.waiting_reason}{message}{hint}"))
        elif pod.unschedulable_message:
            found.append(Blocker("Unschedulable", subject(pod), f"cannot schedule: {pod.unschedulable_message}"))
    return found


def admission_blocker(denial: AdmissionDenial) -> Blocker:
    """Admission refused a create; the gang gives back what it holds and waits for the retry (nextRestartTime)."""
    more = f" (and {len(denial.messages) - 1} more)" if len(denial.messages) > 1 else ""
    return Blocker(
        "AdmissionDenied",
        "creating the workers",
        f"was refused by admission: {denial.messages[0]}{more}; retrying at status.nextRestartTime",
    )


def taken_blockers(job: TrainingJob, current: Mapping[Replica, PodView], taken: Mapping[str, str]) -> list[Blocker]:
    """Workers that cannot be created because a pod that is not theirs holds their name (reconcile/namesakes.py):
    `taken` maps pod names to what holds them."""
    found = []
    for replica in sorted(desired_replicas(job.spec), key=replica_order):
        name = pod_name(job.name, replica.role, replica.index)
        if name in taken and replica not in current:
            detail = f"cannot be created: a pod of that name is not this job's {replica.role}: {taken[name]}"
            found.append(Blocker("PodNameTaken", f"{replica} (pod {name})", detail))
    return found


def overdue_seconds(pod: PodView, now: datetime.datetime) -> float | None:
    """Seconds a pod being deleted has outlived its grace period (deletionTimestamp is the end of it)."""
    end = pod.deletion_timestamp
    return None if end is None or not pod.deleting else (now - end).total_seconds()


def stuck_pods(pods: Iterable[PodView], now: datetime.datetime, bound: float) -> list[PodView]:
    """Pods still Terminating `bound` seconds after their grace period ended."""
    return [p for p in pods if (overdue_seconds(p, now) or -1.0) >= bound]


def _text(moment: datetime.datetime | None) -> str | None:
    return None if moment is None else format_time(moment)


def stuck_blocker(pod: PodView, node: NodeView | None, force_after: int | None) -> Blocker:
    """A stable sentence (times, not durations), so the condition and status are not rewritten while it lasts."""
    where = node.describe() if node is not None else f"node {pod.node_name or '(none)'} (state unknown)"
    if node is not None and node.lost and force_after:
        policy = f"; it is force-deleted {force_after}s after that"
    elif node is not None and node.lost:
        policy = "; force deletion is off (--force-delete-after 0): delete it with --force once the node is gone"
    else:
        policy = "; waiting for its kubelet (a pod on a Ready node is never force-deleted)"
    detail = f"is still Terminating, its grace period ended at {_text(pod.deletion_timestamp)}; {where}{policy}"
    return Blocker("PodStuckTerminating", subject(pod), detail)


def lost_node_blocker(pod: PodView, node: NodeView) -> Blocker:
    """A worker still Running on a node whose kubelet is not heard from: it may not be training, and nothing happens
    until Kubernetes evicts it, so the job says what it waits for (a stable sentence, as stuck_blocker's)."""
    detail = (
        f"may not be running: {node.describe()}; Kubernetes evicts it when its toleration of the node's taint ends "
        "(tolerationSeconds: 300 s by default, shorter with spec.scheduling.tolerations for "
        "node.kubernetes.io/not-ready and node.kubernetes.io/unreachable), then the job restarts by its failurePolicy"
    )
    return Blocker("NodeNotReady", subject(pod), detail)


def nodes_in_question(observed: ObservedChildren, now: datetime.datetime, stuck_after: float) -> list[str]:
    """The nodes whose state explains a worker: under pods stuck Terminating, and under live pods Running but not
    Ready (only a look at the node says whether it is lost or a readiness probe fails)."""
    pods = [*stuck_pods(observed.pods, now, stuck_after), *(p for p in observed.pods if p.live and p.not_ready)]
    return sorted({p.node_name for p in pods if p.node_name})


def force_deletions(
    pods: Iterable[PodView], nodes: Mapping[str, NodeView], now: datetime.datetime, force_after: int | None
) -> list[PodView]:
    """Pods to force-delete: Terminating `force_after` seconds past their grace period on a node that is lost."""
    if not force_after:
        return []
    return [p for p in stuck_pods(pods, now, force_after) if (n := nodes.get(p.node_name or "")) is not None and n.lost]


def next_check(
    observed: ObservedChildren, job: TrainingJob, now: datetime.datetime, stuck_after: int, force_after: int | None
) -> float | None:
    """Seconds until a pod being deleted, or the checkpoint PVC, reaches a bound of its own (a requeue then): the
    report bound, then while it is stuck the force bound or a fresh look at its node every `stuck_after`."""
    waits: list[float] = []
    for pod in observed.pods:
        overdue = overdue_seconds(pod, now)
        if overdue is None:
            continue
        if overdue < stuck_after:
            waits.append(stuck_after - overdue)
        elif force_after and overdue < force_after:
            waits.append(min(force_after - overdue, stuck_after))
        else:
            waits.append(stuck_after)
    claim = observed.claims.get(f"{job.name}-checkpoints")
    created = claim.created if claim is not None and claim.phase == ClaimPhase.PENDING else None
    if created is not None and (age := (now - created).total_seconds()) < stuck_after:
        waits.append(stuck_after - age)
    return max(min(waits), 1.0) if waits else None


def claim_blocker(
    job: TrainingJob, claims: Mapping[str, ClaimView], now: datetime.datetime, bound: float
) -> Blocker | None:
    """The checkpoint PVC the operator created is still Pending `bound` seconds after its creation."""
    storage = job.spec.checkpoint.storage
    if storage is None or storage.claim_name:
        return None
    claim = claims.get(f"{job.name}-checkpoints")
    created = claim.created if claim is not None else None
    if claim is None or claim.phase != ClaimPhase.PENDING or created is None or (now - created).total_seconds() < bound:
        return None
    storage_class = (
        f"StorageClass {storage.storage_class_name}" if storage.storage_class_name else "the default StorageClass"
    )
    return Blocker(
        "CheckpointVolumePending",
        f"checkpoint PVC {claim.name}",
        f"is still Pending ({', '.join(storage.access_modes)} from {storage_class}): many StorageClasses cannot "
        "provide ReadWriteMany; choose one that can (checkpoint.storage.storageClassName), or an existing claim "
        f"(checkpoint.storage.claimName); kubectl describe pvc {claim.name} says why",
    )


def find_blockers(
    job: TrainingJob,
    current: Mapping[Replica, PodView],
    observed: ObservedChildren,
    now: datetime.datetime,
    stuck_after: int,
    force_after: int | None,
) -> list[Blocker]:
    """Everything keeping the gang from running, most fundamental first."""
    found: list[Blocker] = taken_blockers(job, current, observed.taken_names)
    if observed.admission is not None:
        found.append(admission_blocker(observed.admission))
    claim = claim_blocker(job, observed.claims, now, stuck_after)
    if claim is not None:
        found.append(claim)
    for pod in stuck_pods(observed.pods, now, stuck_after):
        found.append(stuck_blocker(pod, observed.nodes.get(pod.node_name or ""), force_after))
    return found + lost_node_blockers(current, observed.nodes) + worker_blockers(current)


def lost_node_blockers(current: Mapping[Replica, PodView], nodes: Mapping[str, NodeView]) -> list[Blocker]:
    """Workers Running, not Ready, on a node that is lost (the job may still count them as running)."""
    found = []
    for replica in sorted(current, key=replica_order):
        pod, node = current[replica], nodes.get(current[replica].node_name or "")
        if pod.live and pod.not_ready and node is not None and node.lost:
            found.append(lost_node_blocker(pod, node))
    return found


def blocked_summary(blockers: Sequence[Blocker]) -> str:
    """What status.message adds: the first blocker, and how many more there are."""
    if not blockers:
        return ""
    more = f" (and {len(blockers) - 1} more blocked)" if len(blockers) > 1 else ""
    return f"; {blockers[0].message}{more}"


# Reasons whose wording moves while the state does not: the kubelet alternates ErrImagePull/ImagePullBackOff with
# different messages, the scheduler recounts nodes ("0/4 nodes…", "0/5 nodes…").
RESTATED_REASONS = frozenset({"ImagePullBackOff", "Unschedulable"})


def blocked_condition(previous: Mapping[str, Any] | None, blocker: Blocker) -> tuple[str, str]:
    """(reason, message) of the Blocked condition. For RESTATED_REASONS the same reason about the same subject keeps
    its first message, so a restated one causes neither a write nor an Event; other messages carry news (a node
    that went NotReady, a quota's new usage) and replace it."""
    if (
        blocker.reason in RESTATED_REASONS
        and previous is not None
        and previous.get("status") == "True"
        and previous.get("reason") == blocker.reason
        and str(previous.get("message", "")).startswith(blocker.subject + " ")
    ):
        return blocker.reason, previous["message"]
    return blocker.reason, blocker.message


def blocked_event(previous: Mapping[str, Any] | None, reason: str, message: str) -> Event | None:
    """One Warning per new blocker: when the condition turns True, or True with another reason or message."""
    if (
        previous is not None
        and previous.get("status") == "True"
        and (previous.get("reason"), previous.get("message")) == (reason, message)
    ):
        return None
    return Event("Warning", reason, message)
