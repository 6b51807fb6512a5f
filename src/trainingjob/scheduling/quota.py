"""Does a job's gang fit the namespace's ResourceQuotas? Pure arithmetic over the worker pod and the quotas.

The API server checks each pod against the quotas when the operator creates it; a gang whose total exceeds a
quota's hard limit can never start, and pods that omit a resource a quota constrains are refused outright. Both
are known at admission, so the validating webhook says so then instead of leaving the job Pending for ever.
The planner asks the same question before it creates a gang's workers (reconcile/gangs.py): quota admission judges
pods one by one, so a gang created pod by pod into a quota without room for all of it would get part in, and that
part would hold quota another job needs; the operator creates none of them until all fit.
Quotas with scopes are matched as the quota controller matches pods (BestEffort, NotBestEffort, Terminating,
NotTerminating, PriorityClass); CrossNamespacePodAffinity and VolumeAttributesClass scopes never apply to ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import worker_resources
from trainingjob.kube.quantity import QuantityError, parse_quantity

COMPUTE = ("cpu", "memory", "ephemeral-storage")
POD_COUNTS = ("pods", "count/pods")
# How long a namespace's quotas read by the operator or its webhook are trusted: usage moves with every pod created
# or finished, so short, and a job waiting for room sees it soon.
QUOTA_TTL = 2.0
BINARY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_quantity(amount: Decimal, resource: str) -> str:
    """Readable: CPU in cores or millicores, bytes in the largest binary unit that divides them."""
    if resource.endswith("cpu") and amount != amount.to_integral_value():
        return f"{(amount * 1000).normalize():f}m"
    if resource.endswith(("memory", "ephemeral-storage")):
        for suffix, unit in BINARY_UNITS:
            if amount >= unit and amount % unit == 0:
                return f"{(amount / unit).normalize():f}{suffix}"
    return f"{amount.normalize():f}"


@dataclass(frozen=True)
class PodDemand:
    """What one worker pod counts against quotas."""

    requests: dict[str, Decimal]
    limits: dict[str, Decimal]
    priority_class: str | None
    terminating: bool  # the pod has activeDeadlineSeconds

    @property
    def best_effort(self) -> bool:
        return not any(key in COMPUTE for key in (*self.requests, *self.limits))


def _container_amounts(container: Mapping[str, Any]) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    resources = container.get("resources") or {}
    limits = {name: parse_quantity(v) for name, v in (resources.get("limits") or {}).items()}
    requests = {name: parse_quantity(v) for name, v in (resources.get("requests") or {}).items()}
    return requests, limits


def _add(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _at_least(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        total[name] = max(total.get(name, Decimal(0)), amount)


def _with_defaults(
    requests: dict[str, Decimal], limits: dict[str, Decimal], defaults: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """A container's amounts as admission completes them: a limit alone is also the request, and `defaults`
    (LimitRange items of type Container) fill what it leaves out."""
    for name, amount in limits.items():
        requests.setdefault(name, amount)
    for item in defaults:
        for name, value in (item.get("default") or {}).items():
            limits.setdefault(name, parse_quantity(value))
        for name, value in (item.get("defaultRequest") or {}).items():
            requests.setdefault(name, parse_quantity(value))
        for name, amount in limits.items():
            requests.setdefault(name, amount)
    return requests, limits


@dataclass(frozen=True)
class RoleDemand:
    """What a pod of one role of a job asks for, read once from the job (builders/pod.py: worker_resources): its
    requests and limits as declared, and its priority class. A quantity that does not parse is left out and
    noted: the API server refuses such a pod anyway, and says why."""

    requests: Mapping[str, Decimal]
    limits: Mapping[str, Decimal]
    priority_class: str | None = None
    unparsed: bool = False

    def pod(self, defaults: Iterable[Mapping[str, Any]] = ()) -> PodDemand:
        """As quota admission counts such a pod (`defaults`: LimitRange items of type Container)."""
        requests, limits = _with_defaults(dict(self.requests), dict(self.limits), list(defaults))
        return PodDemand(requests, limits, self.priority_class, terminating=False)


def role_demand(job: TrainingJob, role: str) -> RoleDemand:
    """The demand of a pod of `role`: the gang's minResources (reconcile/gangs.py) and the quota check both read it."""
    resources = worker_resources(job, role)
    parsed: dict[str, dict[str, Decimal]] = {"requests": {}, "limits": {}}
    unparsed = False
    for kind, amounts in parsed.items():
        for name, value in (resources.get(kind) or {}).items():
            try:
                amounts[name] = parse_quantity(value)
            except QuantityError:
                unparsed = True
    return RoleDemand(parsed["requests"], parsed["limits"], job.spec.scheduling.priority_class_name, unparsed)


def pod_demand(pod: Mapping[str, Any], defaults: Iterable[Mapping[str, Any]] = ()) -> PodDemand:
    """Requests and limits of a pod as quota counts them: containers summed, init containers as a floor, with
    `defaults` (LimitRange items of type Container) filling what a container leaves out."""
    spec = pod.get("spec") or {}
    defaults = list(defaults)

    def amounts(container: Mapping[str, Any]) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
        return _with_defaults(*_container_amounts(container), defaults)

    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        container_requests, container_limits = amounts(container)
        _add(requests, container_requests)
        _add(limits, container_limits)
    for container in spec.get("initContainers") or []:
        container_requests, container_limits = amounts(container)
        _at_least(requests, container_requests)
        _at_least(limits, container_limits)
    return PodDemand(requests, limits, spec.get("priorityClassName"), spec.get("activeDeadlineSeconds") is not None)


def _scope_matches(scope: str, pod: PodDemand) -> bool:
    return {
        "BestEffort": pod.best_effort,
        "NotBestEffort": not pod.best_effort,
        "Terminating": pod.terminating,
        "NotTerminating": not pod.terminating,
    }.get(scope, False)


def _selector_matches(expression: Mapping[str, Any], pod: PodDemand) -> bool:
    scope, operator = expression.get("scopeName"), expression.get("operator")
    if scope != "PriorityClass":
        return _scope_matches(scope or "", pod) == (operator != "DoesNotExist")
    values = expression.get("values") or []
    return {
        "In": pod.priority_class in values,
        "NotIn": pod.priority_class not in values,
        "Exists": pod.priority_class is not None,
        "DoesNotExist": pod.priority_class is None,
    }.get(operator or "", False)


def quota_applies(quota: Mapping[str, Any], pod: PodDemand) -> bool:
    spec = quota.get("spec") or {}
    selector = (spec.get("scopeSelector") or {}).get("matchExpressions") or []
    return all(_scope_matches(scope, pod) for scope in spec.get("scopes") or []) and all(
        _selector_matches(expression, pod) for expression in selector
    )


@dataclass(frozen=True)
class Shortfall:
    """One quota limit the gang runs into."""

    quota: str
    resource: str
    hard: Decimal
    used: Decimal
    needed: Decimal
    missing: bool = False  # the pods do not say how much of `resource` they use, and the quota requires it

    @property
    def never_fits(self) -> bool:
        return self.missing or self.needed > self.hard


def _counted_as(resource: str) -> tuple[str, str] | None:
    """Which of a pod's amounts a quota resource counts: ("requests" | "limits" | "pods", name), or None for what
    quotas count per object of other kinds (services, PVC storage, count/<kind>)."""
    if resource in POD_COUNTS:
        return ("pods", "")
    kind, _, name = resource.partition(".")
    if kind in ("requests", "limits") and name:
        return (kind, name)
    if resource in COMPUTE:
        return ("requests", resource)
    return None


def gang_shortfalls(quotas: Iterable[Mapping[str, Any]], pods: Sequence[tuple[PodDemand, int]]) -> list[Shortfall]:
    """Every (quota, resource) a gang of (pod, how many) groups (one per role) runs into: a pod that omits a
    compute resource the quota constrains (refused always), or a total above what is free now (`never_fits` when
    above hard). Each quota counts only the pods its scopes match."""
    found = []
    for quota in quotas:
        matched = [(pod, count) for pod, count in pods if count > 0 and quota_applies(quota, pod)]
        if not matched:
            continue
        name = (quota.get("metadata") or {}).get("name", "")
        hard = (quota.get("spec") or {}).get("hard") or {}
        used = (quota.get("status") or {}).get("used") or {}
        for resource, limit in sorted(hard.items()):
            counted = _counted_as(resource)
            if counted is None:
                continue
            hard_amount, used_amount = parse_quantity(limit), parse_quantity(used.get(resource, 0))
            kind, key = counted
            amounts = [(pod.requests if kind == "requests" else pod.limits, count) for pod, count in matched]
            if kind != "pods" and key in COMPUTE and any(key not in each for each, _ in amounts):
                found.append(Shortfall(name, resource, hard_amount, used_amount, Decimal(0), missing=True))
                continue
            needed = sum(
                ((Decimal(1) if kind == "pods" else each.get(key, Decimal(0))) * count for each, count in amounts),
                Decimal(0),
            )
            if needed > hard_amount - used_amount:
                found.append(Shortfall(name, resource, hard_amount, used_amount, needed))
    return found


def describe(shortfall: Shortfall, workers: int, unit: str = "workers") -> str:
    """The shortfall in words: what to set, or how much the gang needs against what the quota has."""
    resource, quota = shortfall.resource, shortfall.quota
    if shortfall.missing:
        name = resource.partition(".")[2] or resource
        kind = "limits" if resource.startswith("limits.") else "requests"
        return (
            f"ResourceQuota {quota} constrains {resource}, so every pod must set it: set "
            f"spec.resources.{kind}.{name} (the API server would refuse the workers)"
        )
    amount = format_quantity(shortfall.needed, resource)
    hard, free = format_quantity(shortfall.hard, resource), format_quantity(shortfall.hard - shortfall.used, resource)
    if shortfall.never_fits:
        return (
            f"ResourceQuota {quota} allows {resource} {hard} in this namespace, and the gang of {workers} {unit} "
            f"needs {amount}: it could never start; use fewer workers or smaller ones, or raise the quota"
        )
    return (
        f"ResourceQuota {quota}: {free} of {hard} {resource} free now and the gang needs {amount}; the workers are "
        "created once enough is free"
    )


def container_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The LimitRange items that fill a container's unset requests and limits (type Container)."""
    return [
        item
        for limit_range in limit_ranges
        for item in (limit_range.get("spec") or {}).get("limits") or []
        if item.get("type") == "Container"
    ]


@dataclass(frozen=True)
class NamespaceQuotas:
    """A namespace's ResourceQuotas (as the API serves them) and its LimitRanges' container defaults."""

    quotas: tuple[Mapping[str, Any], ...] = ()
    defaults: tuple[Mapping[str, Any], ...] = ()
