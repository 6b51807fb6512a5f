"""What the Workload controller watches: the Workloads of TrainingJobs (by the job they belong to), and Kueue's
ResourceFlavors and WorkloadPriorityClasses (by name, lookups only: a few objects per cluster).

The Workloads carry our labels (builders/common.child_metadata), so one label selector finds them all. Always
watched: on a cluster without Kueue the listings answer 404, which counts as empty, and each informer then waits on
a watch of its CRD by name (kube/crd_gate.py) instead of listing again every 30 s, so Kueue installed later is seen
at once, without a restart (Caches.serves says when).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.kube.reflector import Resource, object_key
from trainingjob.operator.runtime.controller import Registration
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.store import IndexName
from trainingjob.operator.runtime.views import MANAGED, labels
from trainingjob.operator.trainingjob.watches import JOB_WORKLOADS_INDEX, JOBS_WATCH, TRAININGJOB_BODIES, TRAININGJOBS
from trainingjob.queueing.admission import FlavorView, WorkloadView, flavor_view, priority_value, workload_view
from trainingjob.queueing.workload import API_VERSION, GROUP, KIND, PLURAL

VERSION = API_VERSION.rpartition("/")[2]
WORKLOADS = Resource(GROUP, VERSION, PLURAL, KIND)
RESOURCE_FLAVORS = Resource(GROUP, VERSION, "resourceflavors", "ResourceFlavor")
PRIORITY_CLASSES = Resource(GROUP, VERSION, "workloadpriorityclasses", "WorkloadPriorityClass")
Entry = tuple[Hashable, Any] | None

JOB_WORKLOADS: IndexName[WorkloadView] = IndexName(JOB_WORKLOADS_INDEX)
FLAVORS: IndexName[FlavorView] = IndexName("resource_flavors")
PRIORITIES: IndexName[int] = IndexName("workload_priority_classes")


def job_workload(body: Mapping[str, Any]) -> Entry:
    job = labels(body).get(k.LABEL_JOB_NAME)
    return ((object_key(body)[0], job), workload_view(body)) if job else None


def flavor(body: Mapping[str, Any]) -> Entry:
    view = flavor_view(body)
    return view.name, view


def priority_class(body: Mapping[str, Any]) -> Entry:
    return object_key(body)[1], priority_value(body)


KUEUE_WATCHES: tuple[Watch, ...] = (
    # A Workload created stands in for the cached one until its event arrives (Watch.stands_in): a job planned in
    # between (its status write echoing back) would create it again and meet AlreadyExists.
    Watch(WORKLOADS, MANAGED, {JOB_WORKLOADS: job_workload}, gated=True, stands_in=True),
    Watch(RESOURCE_FLAVORS, "", {FLAVORS: flavor}, cluster_scoped=True, gated=True),
    Watch(PRIORITY_CLASSES, "", {PRIORITIES: priority_class}, cluster_scoped=True, gated=True),
)

# For: the jobs (the TrainingJob controller's informer and index, shared). Owns: their Workloads.
REGISTRATION = Registration(
    TRAININGJOBS, TRAININGJOB_BODIES, owns=(JOBS_WATCH, *KUEUE_WATCHES), lookups=frozenset({FLAVORS, PRIORITIES})
)
