"""Updates of accepted TrainingJobs, fuzzed through the real API server (its transition rules), the admission
webhooks' UPDATE path and the operator (issue 41; creates are fuzzed in test_spec_fuzzing.py).

Each example creates a job from a spec drawn "as drawn" and waits until the operator has reconciled it, then
replaces its spec with another one drawn for the same version and framework: as drawn, with one value made wrong, or
with an unknown field; and half the time with what a job keeps for life (runtimeRef, managedBy, the checkpoint's
storage and deleteOnCompletion, having roles) copied from the stored job, so that updates get past the transition
rules about as often as they run into them. Every update must end one of two ways:
- refused with 400, 403 or 422 and a message that names the field (never a 500: a webhook failing), the stored job
  unchanged (same generation); or
- accepted, and then reconciled: the operator writes a status for the new generation with a known phase (a spec
  only the operator can judge ends Failed with an InvalidSpec Event).
Throughout, the operator neither exits nor logs an error or a traceback, and every job deleted at the end is gone
(no stuck finalizer). TJ_UPDATE_FUZZ_EXAMPLES (default 30) sets the count; a failure prints both specs.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import time
import uuid
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from tests.integration.v1_support import read
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
from tests.spec_strategies import spec_schema, specs
from trainingjob.api import constants as k
from trainingjob.api.managed_by import managed_here

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
EXAMPLES = int(os.environ.get("TJ_UPDATE_FUZZ_EXAMPLES") or 30)
OUTCOMES: collections.Counter[str] = collections.Counter()
CREATED: list[tuple[str, str, str]] = []  # version, name and spec of every job created
LIFELONG = ("runtimeRef", "managedBy")  # kept whole (or absent) by the transition rules


def keep_lifelong(update: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """`update` with what the stored `spec` keeps for life: as the transition rules of the CRD would have it."""
    update = copy.deepcopy(update)
    for name in LIFELONG:
        if name in spec:
            update[name] = copy.deepcopy(spec[name])
        else:
            update.pop(name, None)
    storage = (spec.get("checkpoint") or {}).get("storage")
    if storage is not None:
        drawn = update.get("checkpoint")
        checkpoint = update["checkpoint"] = dict(drawn) if isinstance(drawn, dict) else {}
        checkpoint["storage"] = copy.deepcopy(storage)
        checkpoint.pop("deleteOnCompletion", None)
        if "deleteOnCompletion" in spec["checkpoint"]:
            checkpoint["deleteOnCompletion"] = spec["checkpoint"]["deleteOnCompletion"]
    if bool(spec.get("roles")) != bool(update.get("roles")):
        if spec.get("roles"):
            update["roles"] = copy.deepcopy(spec["roles"])
        else:
            update.pop("roles", None)
    return update


def created_and_reconciled(kube: Kube, namespace: str, version: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The job made from `spec` once reconciled; None when the API server refused it or its TTL deleted it first
    (the create fuzzing judges those)."""
    name = f"fu-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": f"{k.GROUP}/{version}", "kind": k.KIND, "metadata": {"name": name}, "spec": spec}
    try:
        kube.custom.create_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, body)
    except ApiException:
        return None
    CREATED.append((version, name, json.dumps(spec)[:1500]))
    job = wait_until(lambda: reconciled(kube, namespace, name), 120, f"the operator to reconcile {json.dumps(spec)}")
    return None if job is GONE else read(kube, namespace, name, version)


def replaced(kube: Kube, namespace: str, version: str, name: str, update: dict[str, Any]) -> dict[str, Any] | None:
    """Replace the job's spec with `update` (again on a conflict with the operator's status write); the job after
    it, None when it was gone. A refusal raises."""
    for _ in range(10):
        job = read(kube, namespace, name, version)
        if job is None:
            return None
        job["spec"] = update
        try:
            return kube.custom.replace_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, name, job)
        except ApiException as error:
            if error.status == 404 and _not_found_name(error) == name:
                return None  # its TTL deleted it between the read and the replace (ttlSecondsAfterFinished: 0)
            if error.status != 409:
                raise
    raise AssertionError(f"10 conflicts in a row replacing {name}")


def _not_found_name(error: ApiException) -> str | None:
    """The object a 404 says is gone (its Status's details.name)."""
    try:
        return (json.loads(error.body or "{}").get("details") or {}).get("name")
    except (ValueError, AttributeError):
        return None


def update_one(kube: Kube, namespace: str, version: str, job: dict[str, Any], update: dict[str, Any], how: str) -> None:
    name, generation = job["metadata"]["name"], job["metadata"]["generation"]
    shown = f"{version} {how}: {json.dumps(update)[:1500]}\nof {json.dumps(job['spec'])[:1500]}"
    try:
        after = replaced(kube, namespace, version, name, update)
    except ApiException as error:
        problem = refusal_names_the_field(error)
        assert problem is None, f"{problem}\nfor {shown}"
        now = read(kube, namespace, name, version)
        assert now is None or now["metadata"]["generation"] == generation, f"changed though refused: {shown}"
        OUTCOMES[f"refused {error.status}"] += 1
        return
    if after is None:
        OUTCOMES["gone before the update (TTL)"] += 1
        return
    job = wait_until(lambda: reconciled(kube, namespace, name), 120, f"the operator to reconcile {shown}")
    if job is GONE:
        OUTCOMES["accepted, then deleted by its TTL"] += 1
        return
    phase, reasons = judged_outcome(kube, namespace, name, job, shown)
    OUTCOMES[f"accepted, {phase}" + (" (InvalidSpec)" if "InvalidSpec" in reasons else "")] += 1


def test_every_drawn_update_is_refused_with_its_field_or_reconciled_to_a_known_phase(
    kube: Kube, namespace: str, operator: RunningOperator, world: World
) -> None:
    log_start, began = operator.log_path.stat().st_size, time.monotonic()

    @fuzz_settings(EXAMPLES)
    @given(st.sampled_from(["v1alpha1", "v1"]).flatmap(lambda v: st.tuples(st.just(v), specs(v, world))), st.data())
    def drawn(example: tuple[str, tuple[dict[str, Any], str]], data: st.DataObject) -> None:
        version, (spec, how) = example
        assume(how == "as drawn" and managed_here({"spec": spec}))
        # Everything is drawn before the cluster answers: hypothesis replays draws and must not see them depend on
        # what the cluster did (FlakyStrategyDefinition). The framework a job gets when it names none is the default.
        framework = spec.get("framework") or spec_schema(version)["properties"]["framework"]["default"]
        update, change = data.draw(specs(version, world, framework=framework))
        keep = data.draw(st.booleans())
        job = created_and_reconciled(kube, namespace, version, spec)
        if job is None:
            OUTCOMES["not created or gone at once (judged by the create fuzzing)"] += 1
            return
        if keep:
            update, change = keep_lifelong(update, job["spec"]), f"{change}, lifelong fields kept"
        update_one(kube, namespace, version, job, update, change)

    drawn()
    all_deleted(kube, namespace, CREATED)
    assert operator.process.poll() is None, "the operator exited"
    errors = logged_errors(operator, log_start)
    assert not errors, "the operator logged errors:\n" + "\n".join(errors[:20])
    print(f"update fuzzing: {EXAMPLES} examples in {time.monotonic() - began:.0f}s: {dict(OUTCOMES)}")
    accepted = sum(count for outcome, count in OUTCOMES.items() if outcome.startswith("accepted"))
    assert accepted >= EXAMPLES // 5, f"too few updates reached the operator: {dict(OUTCOMES)}"
