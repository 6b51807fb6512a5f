"""The admission stamp and the hold (issue 41, finding 2): pure, no server. A job is admitted only by a stamp made
for its namespace, name, object and pod-shaping spec with the operator's key, or by having been reconciled at its
current generation before; anything else is held with condition Blocked, reason NotAdmitted."""

from __future__ import annotations

import datetime
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.reconcile.admission import ANNOTATION, HOLD_REASON, admission_problem, hold, sign, stamp_problem

KEY = b"k" * 32
NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


def job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **metadata: Any) -> TrainingJob:
    meta = {
        "name": "train",
        "namespace": "ml",
        "uid": "uid-1",
        "generation": 1,
        "creationTimestamp": "2026-11-28T12:00:05Z",
    }
    meta.update(metadata)
    body = {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": meta, "status": status or {}}
    body["spec"] = {"framework": "pytorch", "image": "img:1", "command": ["python"], "workers": 2, **(spec or {})}
    return TrainingJob.from_body(body)


def stamped(of: TrainingJob, uid: str = "", when: datetime.datetime = NOW, key: bytes = KEY) -> dict[str, str]:
    return {ANNOTATION: sign(key, of, uid, when)}


def test_a_stamp_vouches_for_the_job_it_was_made_for() -> None:
    assert stamp_problem(KEY, job(), stamped(job())) is None
    assert stamp_problem(KEY, job(), stamped(job(), uid="uid-1")) is None


def test_a_change_that_shapes_the_pods_voids_the_stamp_and_one_that_does_not_keeps_it() -> None:
    annotations = stamped(job())
    assert "not for this spec" in (stamp_problem(KEY, job({"image": "evil:1"}), annotations) or "")
    assert "not for this spec" in (
        stamp_problem(KEY, job({"securityContext": {"privileged": True}}), annotations) or ""
    )
    assert stamp_problem(KEY, job({"suspend": True, "backoffLimit": 9}), annotations) is None
    assert stamp_problem(KEY, job({"workers": 5}), annotations) is None, "scaled (no webhook sees /scale)"


def test_a_stamp_is_worth_nothing_elsewhere() -> None:
    annotations = stamped(job())
    assert stamp_problem(KEY, job(name="other"), annotations) is not None
    assert stamp_problem(KEY, job(namespace="other"), annotations) is not None
    assert stamp_problem(b"x" * 32, job(), annotations) is not None, "another key"
    assert "another object" in (stamp_problem(KEY, job(uid="uid-2"), stamped(job(), uid="uid-1")) or "")
    later = job(creationTimestamp="2026-11-28T13:00:00Z")  # a new object of the same name, an hour on
    assert "earlier object" in (stamp_problem(KEY, later, annotations) or "")
    for value in ("", "v1.x.-.y", "v9.1.-.abc", "forged"):
        assert stamp_problem(KEY, job(), {ANNOTATION: value}) is not None, value
    assert "no admission stamp" in (stamp_problem(KEY, job(), {}) or "")


def test_a_job_reconciled_at_its_generation_before_stamps_existed_is_admitted_without_a_stamp() -> None:
    """Jobs from before stamps keep running; a spec changed since (a new generation) is not; and a job created
    since stamping began is never admitted for its status (anyone who may write trainingjobs/status can forge it)."""
    since = NOW + datetime.timedelta(minutes=1)  # the job was created at 12:00:05
    reconciled = job(status={"phase": "Running", "observedGeneration": 1})
    assert admission_problem(KEY, reconciled, {}, since) is None
    assert admission_problem(KEY, job(status={"phase": "Running", "observedGeneration": 1}, generation=2), {}, since)
    assert admission_problem(KEY, job(status={"observedGeneration": 1}), {}, since), "no phase: never planned"
    assert "no admission stamp" in (admission_problem(KEY, reconciled, {}, NOW) or ""), "created since: forged"
    assert admission_problem(KEY, reconciled, {}, None), "not known when stamping began: no exemption"


def test_the_hold_creates_nothing_says_why_once_and_admits_nothing() -> None:
    held = job(status={"phase": "Running", "observedGeneration": 1}, generation=2)
    plan = hold(held, "it carries no admission stamp", NOW)
    assert plan.actions == [] or all(type(a).__name__ == "AddFinalizer" for a in plan.actions)
    assert plan.status.observed_generation == 1, "the hold must not make the spec look reconciled"
    blocked = plan.status.condition("Blocked") or {}
    assert (blocked["status"], blocked["reason"]) == ("True", HOLD_REASON)
    assert f"kubectl annotate trainingjob <name> {ANNOTATION}=check --overwrite" in blocked["message"]
    assert [e.reason for e in plan.events] == [HOLD_REASON]
    again = job(status=plan.status.to_dict(), generation=2)
    assert hold(again, "it carries no admission stamp", NOW).events == [], "one Event, not one per reconcile"
    assert hold(job(), "x", NOW).status.phase == "Pending"
