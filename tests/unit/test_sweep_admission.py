"""A TrainingSweep grants no more than its author could do (issue 41; sweeps/admission.py): the mutating webhook
checks the sweep's author for the trials its template makes and stamps the sweep; the planner makes no trial for a
sweep without a stamp that verifies; a trial is admitted on the operator's token for it, never on the rights of the
operator that creates it. With a fake SubjectAccessReview; the real API server is in
tests/integration/test_sweep_admission.py."""

from __future__ import annotations

import asyncio
import copy
import datetime
from typing import Any

import pytest

from tests.sweep_support import SWEEP_UID, sweep_body, views
from tests.unit.test_admission_checks import KEY, Reviewer
from tests.unit.test_apply import CONFIG
from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.reconcile.admission import ANNOTATION, HOLD_REASON, stamp_problem
from trainingjob.sweeps import study
from trainingjob.sweeps.admission import sign_trial, sweep_problem
from trainingjob.sweeps.planner import ObservedSweep, plan_sweep
from trainingjob.sweeps.types import TrainingSweep
from trainingjob.webhooks.admission import AdmissionRequest, UserInfo, Verdict
from trainingjob.webhooks.stamping import admit, admit_sweep

NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
CREATED = "2026-11-28T12:00:01Z"
BOB = UserInfo("bob")
OPERATOR = UserInfo("system:serviceaccount:trainingjob-system:trainingjob-operator")
EVERYTHING = (("create", "pods", ""), ("get", "secrets", ""), ("use", "hostaccess", ""))


def new_sweep(**template: Any) -> dict[str, Any]:
    body = sweep_body()
    body["spec"]["trialTemplate"]["spec"].update(template)
    del body["metadata"]["uid"]
    return body


def sweep_request(obj: dict[str, Any], old: dict[str, Any] | None = None, user: UserInfo = BOB) -> AdmissionRequest:
    operation = "UPDATE" if old else "CREATE"
    return AdmissionRequest("u1", operation, "ns", "digits", obj, old, version=k.V1, kind=k.SWEEP_KIND, user=user)


def judged(request: AdmissionRequest, reviewer: Reviewer) -> Verdict:
    return asyncio.run(admit_sweep(request, KEY, reviewer, CONFIG, NOW))


def stored(obj: dict[str, Any], verdict: Verdict) -> TrainingSweep:
    """The sweep as the API server stores it after the webhook's patch."""
    body = copy.deepcopy(obj)
    body["metadata"].update(uid=SWEEP_UID, creationTimestamp=CREATED, annotations={ANNOTATION: stamp_of(verdict)})
    return TrainingSweep.from_body(body)


def stamp_of(verdict: Verdict) -> str:
    """The stamp the webhook's patch sets (an object without annotations gets the whole map)."""
    [operation] = verdict.patch
    value = operation["value"]
    return value[ANNOTATION] if isinstance(value, dict) else value


def test_a_sweep_author_who_may_not_create_pods_or_read_the_secret_is_refused() -> None:
    loot = {"env": [{"name": "LOOT", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}
    verdict = judged(sweep_request(new_sweep(**loot)), Reviewer())
    assert not verdict.allowed and verdict.patch == []
    message = verdict.message or ""
    assert message.startswith("a TrainingSweep runs its pods for its author")
    assert "bob may not create pods in namespace ns" in message and "bob may not get secrets db" in message
    host = judged(sweep_request(new_sweep(securityContext={"privileged": True})), Reviewer(("create", "pods", "")))
    assert not host.allowed and "may not use hostaccess" in (host.message or "")


def test_an_allowed_author_gets_a_stamp_that_lets_the_operator_make_trials() -> None:
    reviewer = Reviewer(("create", "pods", ""))
    obj = new_sweep()
    verdict = judged(sweep_request(obj), reviewer)
    assert verdict.allowed and [a.words() for a in reviewer.asked] == ["create pods in namespace ns"]
    admitted = stored(obj, verdict)
    assert sweep_problem(KEY, admitted) is None
    changed = copy.deepcopy(obj)
    changed["spec"]["trialTemplate"]["spec"]["image"] = "evil:1"
    body = {**changed, "metadata": {**changed["metadata"], "uid": SWEEP_UID, "creationTimestamp": CREATED}}
    body["metadata"]["annotations"] = dict(admitted.annotations)
    assert "not for this spec" in (sweep_problem(KEY, TrainingSweep.from_body(body)) or "")
    assert sweep_problem(b"x" * 32, admitted) is not None, "another key"
    assert "no admission stamp" in (sweep_problem(KEY, TrainingSweep.from_body(new_sweep())) or "")


def test_an_update_keeps_the_stamp_unless_the_template_changes() -> None:
    obj = new_sweep()
    admitted = stored(obj, judged(sweep_request(obj), Reviewer(("create", "pods", ""))))
    old = copy.deepcopy(obj)
    old["metadata"].update(uid=SWEEP_UID, creationTimestamp=CREATED, annotations=dict(admitted.annotations))
    more = copy.deepcopy(old)
    more["spec"]["maxTrials"] = 20
    more["metadata"]["annotations"] = {}
    reviewer = Reviewer()
    kept = judged(sweep_request(more, old), reviewer)
    assert kept.allowed and reviewer.asked == [] and stamp_of(kept) == admitted.annotations[ANNOTATION]
    reshaped = copy.deepcopy(old)
    reshaped["spec"]["trialTemplate"]["spec"]["securityContext"] = {"privileged": True}
    refused = judged(sweep_request(reshaped, old), Reviewer(("create", "pods", "")))
    assert not refused.allowed and "a privileged container" in (refused.message or "")


def test_the_planner_makes_no_trial_for_a_sweep_nobody_checked_and_says_how_to_fix_it() -> None:
    sweep = TrainingSweep.from_body(sweep_body())
    problem = sweep_problem(KEY, sweep)
    assert problem is not None
    plan = plan_sweep(sweep, ObservedSweep(trials=views(()), not_admitted=problem), study, NOW)
    assert plan.creates == [] and plan.status["phase"] == "Pending"
    running = next(c for c in plan.status["conditions"] if c["type"] == "Running")
    assert running["reason"] == HOLD_REASON and "kubectl annotate trainingsweep" in running["message"]
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", HOLD_REASON)]
    assert plan_sweep(sweep, ObservedSweep(trials=views(())), study, NOW).creates, "admitted: trials"


def trial_request(manifest: dict[str, Any], user: UserInfo = OPERATOR) -> AdmissionRequest:
    name = manifest["metadata"]["name"]
    return AdmissionRequest("u2", "CREATE", "ns", name, manifest, None, version=k.V1, kind=k.KIND, user=user)


def trial(token_for: str = SWEEP_UID, **spec: Any) -> dict[str, Any]:
    sweep = TrainingSweep.from_body(sweep_body())
    [manifest, _] = plan_sweep(sweep, ObservedSweep(trials=views(())), study, NOW).creates
    manifest["spec"].update(spec)
    manifest["metadata"]["annotations"][ANNOTATION] = sign_trial(KEY, manifest, token_for, NOW)
    return manifest


def admitted_trial(manifest: dict[str, Any], reviewer: Reviewer) -> Verdict:
    return asyncio.run(admit(trial_request(manifest), Verdict(), KEY, reviewer, CONFIG, NOW))


def test_a_trial_is_admitted_on_the_operators_token_without_asking_about_the_operator() -> None:
    manifest = trial()
    reviewer = Reviewer(*EVERYTHING)
    verdict = admitted_trial(manifest, reviewer)
    assert verdict.allowed and reviewer.asked == [], "the operator's rights are never what admits a trial"
    body = copy.deepcopy(manifest)
    body["metadata"].update(uid="trial-uid", creationTimestamp=CREATED)
    assert stamp_problem(KEY, TrainingJob.from_body(body), {ANNOTATION: stamp_of(verdict)}) is None


def test_a_trial_without_a_valid_token_is_refused_even_to_the_operator() -> None:
    unsigned = trial()
    del unsigned["metadata"]["annotations"][ANNOTATION]
    forged = trial()
    forged["spec"]["securityContext"] = {"privileged": True}  # changed after the operator signed it
    stolen = trial(token_for="another-sweep")
    late = trial()
    late["metadata"]["annotations"][ANNOTATION] = sign_trial(KEY, late, SWEEP_UID, NOW - datetime.timedelta(hours=1))
    for manifest, why in (
        (unsigned, "no admission stamp"),
        (forged, "not for this spec"),
        (stolen, "another object"),
        (late, "not from the operator for this sweep just now"),
    ):
        reviewer = Reviewer(*EVERYTHING)
        verdict = admitted_trial(manifest, reviewer)
        assert not verdict.allowed and reviewer.asked == [], why
        assert "is a trial, created by the operator" in (verdict.message or "") and why in (verdict.message or "")


def test_a_job_without_a_sweep_owner_is_checked_as_its_author_as_before() -> None:
    manifest = trial()
    manifest["metadata"]["ownerReferences"] = []
    reviewer = Reviewer()
    verdict = asyncio.run(admit(trial_request(manifest, BOB), Verdict(), KEY, reviewer, CONFIG, NOW))
    assert not verdict.allowed and "bob may not create pods" in (verdict.message or "")


@pytest.mark.timeout(20)
def test_a_template_count_beyond_the_schema_is_left_unstamped_without_building_its_pods() -> None:
    """As for a job (test_admission_checks.py): the schema refuses it after this webhook, which must not build a
    pod with a peer host name for each of 10**12 workers first."""
    reviewer = Reviewer(*EVERYTHING)
    verdict = judged(sweep_request(new_sweep(numWorkers=10**12)), reviewer)
    assert verdict.allowed and verdict.patch == [] and reviewer.asked == []
