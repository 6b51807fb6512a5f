"""Whether a namespace's ResourceQuotas leave room for a gang's workers, before any of them is created.

Why check before creating: quota admission judges each pod alone, so a gang created pod by pod into a quota that
cannot hold all of it gets some pods in and the rest refused, and the ones in hold quota that another job needs
(two such jobs hold each other's share for ever). The operator creates a gang's missing workers only when every
quota that applies to them has room for all of them; otherwise none, and the job says which quota lacks what.
Admission still has the last word: a quota changed between the check and the creates refuses pods as before,
and the gang then gives back what it got (reconcile/workers.py, release_gang).

A quota is checked only when the operator understands all of it: scopes Terminating, NotTerminating, BestEffort,
NotBestEffort and PriorityClass selectors; a quota with any other scope is left to admission.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainingjob.node.quantity import QuantityError, parse_quantity

# Bare names that quota counts as requests (Kubernetes' compute resources).
BARE_REQUESTS = ("cpu", "memory", "ephemeral-storage")
KNOWN_SCOPES = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass"})


@dataclass(frozen=True)
class QuotaView:
    """A ResourceQuota as the check needs it. `used` is None until the quota controller has counted."""

    name: str
    hard: Mapping[str, Decimal] = field(default_factory=dict)
    used: Mapping[str, Decimal] | None = None
    scopes: tuple[str, ...] = ()
    selectors: tuple[Mapping[str, Any], ...] = ()


def _quantities(values: Mapping[str, Any] | None) -> dict[str, Decimal]:
    result = {}
    for name, value in (values or {}).items():
        try:
            result[name] = parse_quantity(value)
        except QuantityError:
            continue
    return result


def quota_view(body: Mapping[str, Any]) -> QuotaView:
    spec, status = body.get("spec") or {}, body.get("status") or {}
    selector = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    return QuotaView(
        name=(body.get("metadata") or {}).get("name", ""),
        hard=_quantities(spec.get("hard")),
        used=_quantities(status.get("used")) if status.get("hard") else None,
        scopes=tuple(spec.get("scopes") or ()),
        selectors=tuple(selector),
    )


@dataclass(frozen=True)
class PodShape:
    """What quota sees of one worker: its requests and limits (base units), priority class and BestEffort-ness."""

    requests: Mapping[str, Decimal]
    limits: Mapping[str, Decimal]
    priority_class: str | None = None

    @property
    def best_effort(self) -> bool:
        return not self.requests and not self.limits

    @classmethod
    def of(cls, resources: Mapping[str, Mapping[str, Any]], priority_class: str | None) -> PodShape:
        return cls(_quantities(resources.get("requests")), _quantities(resources.get("limits")), priority_class)


def _selector_matches(expression: Mapping[str, Any], pod: PodShape) -> bool | None:
    """A scopeSelector expression on one pod; None: a scope this check does not understand."""
    if expression.get("scopeName") != "PriorityClass":
        return None
    operator, values = expression.get("operator"), expression.get("values") or []
    priority = pod.priority_class
    return {
        "In": priority in values,
        "NotIn": priority not in values,
        "Exists": priority is not None,
        "DoesNotExist": priority is None,
    }.get(operator)


def applies(quota: QuotaView, pod: PodShape) -> bool | None:
    """Whether `quota` counts `pod` (our workers never set activeDeadlineSeconds: NotTerminating); None: unknown."""
    scopes = {
        "Terminating": False,
        "NotTerminating": True,
        "BestEffort": pod.best_effort,
        "NotBestEffort": not pod.best_effort,
    }
    for scope in quota.scopes:
        if scope not in scopes:
            return None
        if not scopes[scope]:
            return False
    for expression in quota.selectors:
        matched = _selector_matches(expression, pod)
        if matched is None or not matched:
            return matched
    return True


def demand(resource: str, pod: PodShape, count: int) -> Decimal:
    """How much of quota `resource` `count` such pods take."""
    if resource in ("pods", "count/pods"):
        return Decimal(count)
    if resource.startswith("requests."):
        return pod.requests.get(resource.removeprefix("requests."), Decimal(0)) * count
    if resource.startswith("limits."):
        return pod.limits.get(resource.removeprefix("limits."), Decimal(0)) * count
    if resource in BARE_REQUESTS:
        return pod.requests.get(resource, Decimal(0)) * count
    return Decimal(0)  # object counts, storage: not what creating pods takes


def _text(value: Decimal) -> str:
    return format(value.normalize(), "f") if value != value.to_integral() else str(int(value))


def shortfall(quotas: Iterable[QuotaView], pod: PodShape, count: int) -> str | None:
    """Why `count` workers shaped `pod` do not fit into the quotas (None: they fit, or no quota says otherwise)."""
    for quota in sorted(quotas, key=lambda q: q.name):
        if quota.used is None or not applies(quota, pod):
            continue
        for resource, hard in sorted(quota.hard.items()):
            needed = demand(resource, pod, count)
            used = quota.used.get(resource, Decimal(0))
            if needed > 0 and used + needed > hard:
                left = max(hard - used, Decimal(0))
                return (
                    f"ResourceQuota {quota.name} has {_text(left)} {resource} left (used {_text(used)} of "
                    f"{_text(hard)}) and {count} worker(s) need {_text(needed)}: none is created until all fit"
                )
    return None
