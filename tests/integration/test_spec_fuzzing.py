"""Whole-spec fuzzing through the real API server, its schema and CEL rules, the conversion and admission webhooks
and the operator (issue 41; the strategies: tests/spec_strategies.py).

Every drawn TrainingJob, in v1alpha1 or v1, valid by type or with one value made wrong, must end one of two ways:
- refused by the API server with 400, 403 or 422 and a message that names the field (never a 500: that would be
  a webhook failing), or
- accepted with spec.managedBy naming another controller, and then left alone (no status, finalizer or pod), or
- accepted, and then reconciled: the operator writes a status for its generation with a known phase (a spec only
  the operator can judge ends Failed with an InvalidSpec Event), and deleting it leaves nothing (no stuck
  finalizer).
Throughout, the operator neither exits nor logs an error or a traceback. The specs drawn "as drawn" satisfy the
schema's cross-field rules and name what the test created (a runtime of each kind per framework, a claim, a
PriorityClass), so most are accepted and reach the operator; at least a quarter must be. TJ_FUZZ_EXAMPLES (default 40)
sets the count; a failure prints the drawn spec.
"""

from __future__ import annotations

import collections
import json
import os
import time
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from tests.jobs import get_job
from tests.kill_invariants import logged_errors
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator
from tests.spec_fuzz_support import (
    GONE,
    all_deleted,
    fuzz_settings,
    judged_outcome,
    reconciled,
    refusal_names_the_field,
)
from tests.spec_rules import World
from tests.spec_strategies import specs
from trainingjob.api import constants as k
from trainingjob.api.managed_by import managed_here

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
EXAMPLES = int(os.environ.get("TJ_FUZZ_EXAMPLES") or 40)
OUTCOMES: collections.Counter[str] = collections.Counter()
LEFT_ALONE_SECONDS = 3.0
REFUSALS: list[str] = []  # the first few refusals' messages, for the summary
ACCEPTED: collections.Counter[str] = collections.Counter()  # reconciled by this operator, by framework
CREATED: list[tuple[str, str, str]] = []  # version, name and how it was drawn, of every accepted job
ELSEWHERE: list[tuple[str, str, float]] = []  # name, how drawn and when created, of jobs managed by another


def try_one(kube: Kube, namespace: str, version: str, spec: dict[str, Any], how: str) -> None:
    name = f"fz-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": f"{k.GROUP}/{version}", "kind": k.KIND, "metadata": {"name": name}, "spec": spec}
    shown = f"{version} {how}: {json.dumps(spec)[:2000]}"
    try:
        kube.custom.create_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, body)
    except ApiException as error:
        problem = refusal_names_the_field(error)
        assert problem is None, f"{problem}\nfor {shown}"
        OUTCOMES[f"refused {error.status}"] += 1
        if len(REFUSALS) < 3:
            REFUSALS.append(json.loads(error.body or "{}").get("message", "")[:300])
        return
    if not managed_here(body):
        ELSEWHERE.append((name, shown, time.monotonic()))
        CREATED.append((version, name, shown))
        return
    CREATED.append((version, name, shown))
    job = wait_until(lambda: reconciled(kube, namespace, name), 120, f"the operator to reconcile {shown}")
    if job is GONE:
        assert "ttlSecondsAfterFinished" in spec, f"gone before it was reconciled, without a TTL: {shown}"
        OUTCOMES["accepted, finished and deleted by its TTL"] += 1
        ACCEPTED[spec.get("framework") or "pytorch"] += 1
        return
    phase, reasons = judged_outcome(kube, namespace, name, job, shown)
    why = f" ({'/'.join(sorted(filter(None, reasons)))})" if phase == "Failed" else ""
    OUTCOMES[f"accepted, {phase}{why}"] += 1
    ACCEPTED[job["spec"].get("framework") or "pytorch"] += 1


def left_alone(kube: Kube, namespace: str) -> None:
    """A job another controller manages (spec.managedBy) gets no status, no finalizer and no child from this
    operator. Judged once all are drawn, at least LEFT_ALONE_SECONDS after the last was created: the time the
    operator takes to reconcile any other drawn job (a second or two); it would have written by then."""
    if ELSEWHERE:
        time.sleep(max(0.0, LEFT_ALONE_SECONDS - (time.monotonic() - ELSEWHERE[-1][2])))
    for name, shown, _ in ELSEWHERE:
        job = get_job(kube, namespace, name) or {}
        assert not job.get("status") and not job["metadata"].get("finalizers"), f"{job} for {shown}"
        pods = kube.core.list_namespaced_pod(namespace, label_selector=f"{k.LABEL_JOB_NAME}={name}").items
        assert not pods, f"pods {[p.metadata.name for p in pods]} for {shown}"
        OUTCOMES["accepted, left to its managedBy"] += 1


def test_every_drawn_spec_is_refused_with_its_field_or_reconciled_to_a_known_phase(
    kube: Kube, namespace: str, operator: RunningOperator, world: World
) -> None:
    log_start, began = operator.log_path.stat().st_size, time.monotonic()

    @fuzz_settings(EXAMPLES)
    @given(st.sampled_from(["v1alpha1", "v1"]).flatmap(lambda v: st.tuples(st.just(v), specs(v, world))))
    def drawn(example: tuple[str, tuple[dict[str, Any], str]]) -> None:
        version, (spec, how) = example
        try_one(kube, namespace, version, spec, how)

    drawn()
    left_alone(kube, namespace)
    all_deleted(kube, namespace, CREATED)
    assert operator.process.poll() is None, "the operator exited"
    errors = logged_errors(operator, log_start)
    assert not errors, "the operator logged errors:\n" + "\n".join(errors[:20])
    print(
        f"spec fuzzing: {EXAMPLES} examples in {time.monotonic() - began:.0f}s: {dict(OUTCOMES)}; "
        f"reconciled by framework: {dict(ACCEPTED)}; e.g. {REFUSALS}"
    )
    assert sum(ACCEPTED.values()) >= EXAMPLES // 4, f"too few drawn specs reached the operator: {dict(OUTCOMES)}"
