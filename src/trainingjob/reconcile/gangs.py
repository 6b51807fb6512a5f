"""Planning a job's gang object: which gang its workers join, creating it before them, deleting the ones no worker
needs any more, and whether the scheduler placed it (status.gang, condition GangScheduled, Events).

Which gang a missing worker joins is read from the workers that exist, never remembered: while current workers
are alive, a replacement joins their gang (restartStrategy Worker: the survivors are bound, so the replacement
alone completes the gang's minCount); when none is alive, the attempt that creates them forms a new gang,
`<job>-gang-<attempt>`. A restart of the whole gang (failure, preemption, spec change, scaling, resume) is a new
attempt, so a new gang object with the new size; the old one goes once no live worker refers to it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from trainingjob.api.replicas import Replica, replica_order
from trainingjob.api.status import GangRecord
from trainingjob.api.types import TrainingJob
from trainingjob.builders.pod import Membership
from trainingjob.planning.actions import CreateChild, DeleteChild, Event
from trainingjob.reconcile.blockers import Blocker
from trainingjob.reconcile.observed import ObservedChildren, PodView
from trainingjob.scheduling.gang import GangChoice, GangView, choose, gang_members, gang_name
from trainingjob.scheduling.quota import describe, gang_shortfalls, role_demand

UNAVAILABLE = "GangSchedulingUnavailable"
QUOTA = "QuotaExceeded"
# While quota keeps a gang from being created, how often to look again (quota usage changes without an event of
# ours: another job's workers finish).
QUOTA_RECHECK_SECONDS = 10.0
SCHEDULED = "Scheduled"
WAITING = "Waiting"


@dataclass
class GangPlan:
    """The gang the missing workers join now: `membership` None means they join none; `ready` that its object
    exists, so they may be created; `blocker` that the gang the spec asks for cannot be had here; `quota` that
    the namespace's quota has no room for all the missing workers (none is created then)."""

    choice: GangChoice
    name: str | None = None
    membership: Membership | None = None
    ready: bool = True
    actions: list = field(default_factory=list)
    blocker: Blocker | None = None
    quota: Blocker | None = None

    @property
    def blockers(self) -> list[Blocker]:
        return [b for b in (self.blocker, self.quota) if b is not None]


def own_gangs(job: TrainingJob, observed: ObservedChildren) -> dict[str, GangView]:
    """Gang objects this job controls (a namesake of an earlier job of the same name is not its own)."""
    return {name: view for name, view in observed.gangs.items() if view.controller_uid in ("", job.uid)}


def joined_gang(current: Mapping[Replica, PodView]) -> tuple[bool, str | None]:
    """(whether current workers exist, the gang most of them joined)."""
    labels = [p.gang for p in current.values() if p.live]
    if not labels:
        return False, None
    return True, Counter(labels).most_common(1)[0][0]


def gang_requests(job: TrainingJob) -> dict[str, str]:
    """What the gang's members (gang_members: each role's own resources) request together: coscheduling's and
    Volcano's minResources."""
    total: dict[str, Decimal] = {}
    for role, count in gang_members(job.spec).items():
        for resource, amount in role_demand(job, role).requests.items():
            total[resource] = total.get(resource, Decimal(0)) + amount * count
    return {
        resource: format(amount.normalize() if amount != amount.to_integral() else Decimal(int(amount)), "f")
        for resource, amount in total.items()
        if amount
    }


def plan_gang(
    job: TrainingJob, observed: ObservedChildren, current: Mapping[Replica, PodView], attempt: int
) -> GangPlan:
    """The gang for workers created now, and its object created first (workers wait until the cache shows it)."""
    choice = choose(job, observed.gang_apis)
    if choice.unavailable is not None:
        blocker = Blocker(UNAVAILABLE, "gang scheduling", f"is not possible here: {choice.unavailable}")
        return GangPlan(choice, ready=False, blocker=blocker)
    provider = choice.provider
    exists, joined = joined_gang(current)
    if provider is None or (exists and joined is None):
        return GangPlan(choice)  # no gang, or replacements of workers placed one by one stay so
    name = joined if joined is not None else gang_name(job.name, attempt)
    view = own_gangs(job, observed).get(name)
    plan = GangPlan(choice, name, provider.membership(name), ready=view is not None and not view.deleting)
    if view is None:
        manifest = provider.manifest(job, name, choice.min_count, gang_requests(job))
        plan.actions.append(CreateChild(manifest))
    return plan


def quota_blocker(job: TrainingJob, observed: ObservedChildren, missing: Sequence[Replica]) -> Blocker | None:
    """The first quota without room for all `missing` pods (each role with its own resources, scheduling/quota.py),
    as a blocker."""
    if not observed.quotas.quotas:
        return None
    counts = Counter(replica.role for replica in missing)
    asked = {role: role_demand(job, role) for role in counts}
    if any(demand.unparsed for demand in asked.values()):
        return None  # a quantity the API server refuses anyway, and says why
    try:
        demands = [(asked[role].pod(observed.quotas.defaults), n) for role, n in counts.items()]
    except (ValueError, KeyError, TypeError):
        return None  # a LimitRange default the API server would not apply either
    found = gang_shortfalls(observed.quotas.quotas, demands)
    if not found:
        return None
    unit = _unit(job)
    return Blocker(QUOTA, f"creating the {unit}", f"waits for quota: {describe(found[0], len(missing), unit)}")


def release_gangs(job: TrainingJob, observed: ObservedChildren, keep: Iterable[str | None] = ()) -> list[DeleteChild]:
    """Delete the job's gang objects except `keep` and those a worker the scheduler still places refers to (a
    finished pod needs its gang no more)."""
    kept = set(keep) | {p.gang for p in observed.pods if p.active and p.gang}
    return [
        DeleteChild(view.kind, view.name, view.uid or None, api_version=view.api_version)
        for view in own_gangs(job, observed).values()
        if view.name not in kept and not view.deleting
    ]


def gang_record(
    job: TrainingJob, plan: GangPlan, observed: ObservedChildren, current: Mapping[Replica, PodView]
) -> GangRecord | None:
    """status.gang: the current gang, how many of its workers are placed, and whether it is scheduled or why not."""
    if plan.blocker is not None:
        return GangRecord(WAITING, UNAVAILABLE, plan.blocker.message)
    if plan.name is None or plan.choice.provider is None:
        return None
    provider = plan.choice.provider
    view = own_gangs(job, observed).get(plan.name)
    min_count = (view.min_count if view is not None else 0) or plan.choice.min_count
    members = [p for p in current.values() if p.gang == plan.name and p.live]
    placed = sum(1 for p in members if p.node_name)
    state, reason, message = _placement(view, members, placed, min_count, _unit(job))
    if plan.quota is not None and state == WAITING:
        reason, message = QUOTA, plan.quota.message
    previous = job.status.gang
    restated = previous is not None and (previous.name, previous.state, previous.reason) == (plan.name, state, reason)
    if restated and state == WAITING and placed == previous.placed:
        message = previous.message  # the scheduler recounting nodes is not news
    return GangRecord(
        state,
        reason,
        message,
        provider=provider.name,
        api_version=provider.api.api_version,
        kind=provider.api.kind,
        name=plan.name,
        min_count=min_count,
        placed=placed,
    )


def _unit(job: TrainingJob) -> str:
    return "pods" if job.spec.has_roles else "workers"


def _placement(
    view: GangView | None, members: list[PodView], placed: int, min_count: int, unit: str
) -> tuple[str, str, str]:
    """(state, reason, message) of the gang; `unit` names its members (workers, or pods with other roles)."""
    if placed >= min_count:
        return SCHEDULED, "GangScheduled", f"{placed} {unit} placed together (minCount {min_count})"
    if view is None:
        return WAITING, "GangPending", f"creating the gang object before the {unit}"
    if view.state.scheduled is False:
        detail = f": {view.state.message}" if view.state.message else ""
        return WAITING, view.state.reason or "Unschedulable", f"{placed}/{min_count} {unit} placed{detail}"
    if len(members) < min_count:
        return WAITING, "WorkersPending", f"{len(members)}/{min_count} {unit} created; none is bound before all are"
    refused = next(
        (p for p in sorted(members, key=lambda p: replica_order(p.replica)) if p.unschedulable_message), None
    )
    if refused is not None:
        return (
            WAITING,
            "Unschedulable",
            f"{placed}/{min_count} {unit} placed; {refused.role} {refused.index} cannot schedule: "
            f"{refused.unschedulable_message}",
        )
    return WAITING, "Scheduling", f"{placed}/{min_count} {unit} placed; none is bound before all fit"


def gang_events(job: TrainingJob, record: GangRecord | None) -> list[Event]:
    """A Normal Event when a gang becomes scheduled (once per gang)."""
    previous = job.status.gang
    if record is None or not record.scheduled:
        return []
    if previous is not None and previous.name == record.name and previous.scheduled:
        return []
    return [Event("Normal", "GangScheduled", f"{record.kind} {record.name}: {record.message}")]
