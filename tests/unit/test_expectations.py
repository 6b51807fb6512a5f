"""Expectations (operator/runtime/expectations.py): a created pod stays claimed until its watch event, however late."""

from __future__ import annotations

from typing import Any

from trainingjob.api import constants as k
from trainingjob.config import OperatorConfig
from trainingjob.operator.runtime.expectations import EXPECTATION_TTL_SECONDS, Expectations
from trainingjob.operator.runtime.store import Index, ResourceStore
from trainingjob.operator.runtime.writer import DONE, EXISTED
from trainingjob.operator.trainingjob.apply import Applier, ApplyResult
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.operator.trainingjob.watches import worker_pod
from trainingjob.planning.actions import CreateChild

KEY = ("ns", "job")
JOB_UID = "uid-1"


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"{name}-uid",
            "resourceVersion": "1",
            "labels": {k.LABEL_JOB_NAME: "job"},
            "ownerReferences": [{"uid": JOB_UID, "controller": True, "kind": k.KIND, "name": "job"}],
        },
        "status": {"phase": "Pending"},
    }


def test_a_claim_outlives_a_watch_that_lags_by_a_minute() -> None:
    """30 s was the expiry once: under a saturated API server the pod's event came later and the pod was created
    a second time (AlreadyExists). A claim now waits as long as client-go's, 5 minutes, then expires."""
    memory = Expectations()
    memory.expect_created(["job-worker-0"], 1000.0)
    assert memory.pending_creations(set(), now=1060.0) == {"job-worker-0"}
    assert memory.pending_creations(set(), now=1000.0 + EXPECTATION_TTL_SECONDS - 1) == {"job-worker-0"}
    assert memory.pending_creations(set(), now=1000.0 + EXPECTATION_TTL_SECONDS + 1) == set()
    assert memory.created == {}


def test_a_sighting_settles_only_its_own_name() -> None:
    reconciler, store = reconciler_on_real_indexes()
    reconciler.remember(KEY, None, ApplyResult(claimed_pods=["job-worker-0", "job-worker-1"]))
    store.upsert(pod("job-worker-0"))
    store.upsert({**pod("job-worker-1"), "metadata": {**pod("job-worker-1")["metadata"], "namespace": "other"}})
    assert set(reconciler.memory[KEY].expectations.created) == {"job-worker-1"}
    store.upsert(pod("job-worker-1"))
    assert reconciler.memory[KEY].expectations.created == {}


def reconciler_on_real_indexes() -> tuple[Reconciler, ResourceStore]:
    names = ("trainingjob_bodies", "worker_pods", "worker_services", "job_config_maps", "job_claims")
    indexes = {name: Index() for name in names}
    store = ResourceStore(indexes, {"worker_pods": worker_pod})
    return Reconciler(indexes, None, OperatorConfig()), store  # type: ignore[arg-type]


def test_a_pod_seen_and_gone_before_the_next_plan_is_no_longer_claimed() -> None:
    """The watch showed the pod created and then deleted, both before the job was planned again: the plan must
    not wait for it (it would have, for the whole expiry)."""
    reconciler, store = reconciler_on_real_indexes()
    reconciler.remember(KEY, None, ApplyResult(claimed_pods=["job-worker-0", "job-worker-1"]))
    store.upsert(pod("job-worker-0"))
    store.delete(pod("job-worker-0"))
    assert reconciler.observed(KEY, JOB_UID).claimed_pods == {"job-worker-1"}


def test_a_claimed_pod_the_cache_shows_is_observed_as_a_pod() -> None:
    reconciler, store = reconciler_on_real_indexes()
    reconciler.remember(KEY, None, ApplyResult(claimed_pods=["job-worker-0"]))
    store.upsert(pod("job-worker-0"))
    observed = reconciler.observed(KEY, JOB_UID)
    assert observed.claimed_pods == frozenset() and [p.name for p in observed.pods] == ["job-worker-0"]
    assert reconciler.memory[KEY].expectations.created == {}


def test_only_a_pod_this_call_created_is_claimed() -> None:
    """A create that met AlreadyExists claims nothing: the namesake may be no worker of this job (relabelled, or
    another owner's), and then no event of this job would settle the claim for its 5 minutes."""
    result = ApplyResult()
    for name, outcome in (("job-worker-0", DONE), ("job-worker-1", EXISTED)):
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}}
        Applier.account(CreateChild(manifest), outcome, result)
    assert result.claimed_pods == ["job-worker-0"]
