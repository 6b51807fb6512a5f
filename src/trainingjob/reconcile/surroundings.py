"""Facts from around a job that decide how it can run: its namespace's PodSecurity level, the readiness of a node
holding one of its pods, the phase of its checkpoint PVC, and admission denials of its children.

Pure reductions of API objects (and of the apply layer's answers) to what the planner reads, so the operator's
caches hold a few fields per object and the planner never sees a whole Namespace or Node.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api.times import parse_time

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"


def enforces_restricted(namespace: Mapping[str, Any] | None) -> bool:
    """True when the Namespace's PodSecurity admission enforces `restricted` (its enforce label says so)."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ENFORCE_LABEL) == "restricted"


def is_pod_security_denial(message: str) -> bool:
    """PodSecurity admission's refusal, as the API server words it (`violates PodSecurity "restricted:latest"`)."""
    return "violates PodSecurity" in message


@dataclass(frozen=True)
class NodeView:
    """Whether a node's kubelet is known to be alive: Ready True; False (NotReady) or Unknown (unreachable); gone."""

    name: str
    ready: str = "True"  # the Ready condition's status: True, False, Unknown; "Missing": no such node
    reason: str = ""
    since: str | None = None

    @property
    def lost(self) -> bool:
        """Its kubelet will not finish a pod's termination: NotReady, unreachable, or deleted."""
        return self.ready != "True"

    def describe(self) -> str:
        if self.ready == "Missing":
            return f"node {self.name} no longer exists"
        if self.ready == "True":
            return f"node {self.name} is Ready"
        state, said = ("NotReady", []) if self.ready == "False" else ("unreachable", ["Ready Unknown"])
        said += [self.reason] if self.reason else []
        reason = f" ({', '.join(said)})" if said else ""
        since = f" since {self.since}" if self.since else ""
        return f"node {self.name} is {state}{reason}{since}"


def node_view(name: str, body: Mapping[str, Any] | None) -> NodeView:
    """A node as the stuck-pod policy needs it; None (a 404) is a node that no longer exists."""
    if body is None:
        return NodeView(name, "Missing")
    conditions = (body.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return NodeView(name, "Unknown", "NoReadyCondition")
    return NodeView(name, ready.get("status") or "Unknown", ready.get("reason") or "", ready.get("lastTransitionTime"))


@dataclass(frozen=True)
class ClaimView:
    """A PVC the operator created for the job: its phase, and since when it exists (to bound a Pending one)."""

    name: str
    phase: str | None = None
    created: datetime.datetime | None = None


def claim_view(body: Mapping[str, Any]) -> ClaimView:
    metadata = body.get("metadata") or {}
    return ClaimView(
        metadata.get("name", ""), (body.get("status") or {}).get("phase"), parse_time(metadata.get("creationTimestamp"))
    )


@dataclass(frozen=True)
class Refusal:
    """One create admission refused: of which child, and what the API server said."""

    kind: str
    name: str
    message: str

    def describe(self) -> str:
        return f"{self.kind} {self.name}: {self.message}"


@dataclass(frozen=True)
class AdmissionDenial:
    """Creates of the job's children that admission refused (403: ResourceQuota, LimitRange, a policy webhook, a
    missing PriorityClass): what it said, how many applies in a row were refused, and when the last one was."""

    refusals: tuple[Refusal, ...]
    count: int
    time: datetime.datetime

    @property
    def messages(self) -> tuple[str, ...]:
        return tuple(refusal.describe() for refusal in self.refusals)
