"""When the operator writes a job's EndpointSlices (builders/endpoints.py): pure, from the pods the caches show.

A write per pod that gets its address would add W writes to every job. A gang needs every peer's name before it
can train, so the slice is written once every member has an address. Members still without one (waiting for a
node, or for an image) hold back the others for at most PARTIAL_PUBLISH_DELAY after the oldest unpublished one
started: an elastic job can train without them and needs its peers' names, but not within seconds (torchrun waits
up to its join timeout, 600 s by default, for a rendezvous). Each partial write is one more write for the job, and
under load the workers of one job start seconds apart. A replacement pod completes the set again and is published
as soon as it has its address. Addresses of pods that finished or went away are dropped with the next write, not by
one of their own: nothing resolves a finished worker's name, and a replacement pod (same name, new address) is
itself a change to publish.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from trainingjob.api import constants as k
from trainingjob.api.replicas import role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.builders.endpoints import Endpoint, chunked, desired_endpoint_slice, slice_name, slice_ports
from trainingjob.builders.service import service_selector
from trainingjob.kube.phases import POD_FINISHED
from trainingjob.planning.actions import CreateChild, ReplaceChild
from trainingjob.reconcile.observed import ObservedChildren, PodView

PARTIAL_PUBLISH_DELAY = 30.0  # seconds


def published_role(job: TrainingJob) -> str | None:
    """The one role the Service stands for (workers), or None for every role of a job that has several."""
    return service_selector(job).get(k.LABEL_ROLE)


def members(job: TrainingJob, pods: Iterable[PodView]) -> list[PodView]:
    """The live, unfinished pods the Service stands for (what its selector would have matched)."""
    role = published_role(job)
    return [p for p in pods if p.live and p.phase not in POD_FINISHED and role in (None, p.role)]


def expected_members(job: TrainingJob) -> int:
    role = published_role(job)
    return sum(count for name, count in role_counts(job.spec).items() if role in (None, name))


def endpoint_of(pod: PodView) -> Endpoint:
    return Endpoint(pod.hostname or pod.name, pod.ip or "", pod.name, pod.uid, pod.node_name)


def unpublished_age(pods: Iterable[PodView], added: set[Endpoint], now: datetime.datetime) -> float:
    """Seconds since the oldest pod among `added` started (no startTime: as old as can be)."""
    ages = []
    for pod in pods:
        if pod.ip and endpoint_of(pod) in added:
            started = pod.started_at
            ages.append(float("inf") if started is None else (now - started).total_seconds())
    return max(ages, default=0.0)


def plan_endpoints(
    job: TrainingJob, observed: ObservedChildren, now: datetime.datetime
) -> tuple[list[CreateChild | ReplaceChild], float | None]:
    """The slice writes due now, and in how many seconds to look again when a partial write is held back."""
    if not observed.service_exists or observed.service_selects_pods:
        return [], None
    pods = members(job, observed.pods)
    complete = len(pods) >= expected_members(job) and all(p.ip for p in pods)
    ports = slice_ports(job.spec.master_port)
    actions: list[CreateChild | ReplaceChild] = []
    wait: float | None = None
    for chunk, endpoints in enumerate(chunked([endpoint_of(p) for p in pods if p.ip])):
        name = slice_name(job.name, chunk)
        current = observed.endpoint_slices.get(name)
        ports_changed = current is not None and current.ports != ports
        added = set(endpoints) - set(current.endpoints if current else ())
        if not added and not ports_changed:
            continue  # as published, or only departures (they go with the next write), or nothing to publish yet
        age = unpublished_age(pods, added, now)
        if not complete and not ports_changed and age < PARTIAL_PUBLISH_DELAY:
            wait = min(wait or PARTIAL_PUBLISH_DELAY, PARTIAL_PUBLISH_DELAY - age)
            continue
        manifest = desired_endpoint_slice(job, chunk, endpoints)
        actions.append(CreateChild(manifest) if current is None else ReplaceChild(manifest))
    return actions, wait
