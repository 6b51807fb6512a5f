"""A TrainingSweep grants no more than its author could do (issue 41; sweeps/admission.py), on the real API server
with the shipped RBAC. The operator creates a sweep's trials with its own account, so the admission check of a
trial's create judged the operator: a user allowed only to create TrainingSweeps got pods, Secrets and host
access. Now the mutating webhook checks the sweep's author for the trials its template makes and stamps the sweep,
the operator makes trials only for a stamped sweep, and a trial is admitted on the operator's token for it alone.

Trials run on kwok (they complete after a second and report nothing): what matters here is whether pods exist.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.admission_support import mutating_webhook_withheld
from tests.integration.sweep_helpers import create_sweep, events_of, get_sweep, sweep_manifest, trials, wait_sweep
from tests.integration.test_admission_rbac import DENIED, PODS, api_failure, author, refusal
from tests.integration.test_sweep_api import KWOK_TEMPLATE
from tests.jobs import live_pods
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator, start_again
from trainingjob.api import constants as k
from trainingjob.api import webhook_config as w

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]

SWEEPS_ONLY = [{"apiGroups": [k.GROUP], "resources": [k.SWEEP_PLURAL], "verbs": ["create", "get", "list", "patch"]}]
READ_DB = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["db"]}
LOOT = [{"name": "LOOT", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]


def template(**extra: Any) -> dict[str, Any]:
    return {**copy.deepcopy(KWOK_TEMPLATE), **extra}


def sweep(name: str, **extra: Any) -> dict[str, Any]:
    return sweep_manifest(name, template(**extra), maxTrials=2, parallelism=2, algorithm={"name": "random", "seed": 3})


def test_permission_to_create_sweeps_is_not_permission_to_create_pods(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "db"}, "stringData": {"password": "s3cr3t"}})
    client, user = author(kube, namespace, "sweeps-only", SWEEPS_ONLY)
    refused = refusal(client, namespace, sweep("plain"), create_sweep)
    assert refused.startswith(DENIED) and "a TrainingSweep runs its pods for its author" in refused, refused
    assert f"{user} may not create pods in namespace {namespace} (the job runs pods)" in refused
    privileged = refusal(client, namespace, sweep("root", securityContext={"privileged": True}), create_sweep)
    assert f"{user} may not use hostaccess" in privileged and "a privileged container" in privileged
    # Allowed pods but not the Secret the template reads.
    trainer, user = author(kube, namespace, "no-secrets", [*SWEEPS_ONLY, PODS])
    secret = refusal(trainer, namespace, sweep("loot", env=LOOT), create_sweep)
    assert f"{user} may not get secrets db in namespace {namespace} (its pods read it)" in secret
    assert "may not create pods" not in secret
    assert trials(kube, namespace, "plain") == trials(kube, namespace, "loot") == []
    assert live_pods(kube, namespace, "plain-trial-0") == live_pods(kube, namespace, "loot-trial-0") == []


def test_an_allowed_authors_sweep_gets_trials_that_run(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "db"}, "stringData": {"password": "s3cr3t"}})
    client, _ = author(kube, namespace, "tuner", [*SWEEPS_ONLY, PODS, READ_DB])
    create_sweep(client, namespace, sweep("tuned", env=LOOT))
    stamp = get_sweep(kube, namespace, "tuned")["metadata"]["annotations"][k.ADMISSION_ANNOTATION]
    assert stamp.startswith("v1.")
    wait_until(lambda: len(trials(kube, namespace, "tuned")) == 2, 120, "both trials to be created")
    for trial in trials(kube, namespace, "tuned"):
        name = trial["metadata"]["name"]
        assert trial["metadata"]["annotations"][k.ADMISSION_ANNOTATION].startswith("v1."), "stamped as a job"
        wait_until(lambda name=name: _ran(kube, namespace, name), 120, f"{name} to run its worker")
    status = wait_sweep(kube, namespace, "tuned", lambda s: s.get("phase") == "Failed", "the sweep to end")
    assert status["trialsCreated"] == 2, "kwok's trials report nothing: ObjectiveNotReported, after running"


def _ran(kube: Kube, namespace: str, name: str) -> bool:
    job = kube.custom.get_namespaced_custom_object(k.GROUP, k.V1, namespace, k.PLURAL, name)
    blocked = [c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == "Blocked"]
    assert not any(c["status"] == "True" for c in blocked), blocked
    return (job.get("status") or {}).get("state") in ("Running", "Succeeded") or bool(live_pods(kube, namespace, name))


def test_a_sweep_stored_while_no_webhook_answered_makes_no_trial_until_checked(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """Stored without a stamp (the mutating webhook's configuration removed while no operator answered): the
    operator makes no trial, says why on the sweep (Pending, NotAdmitted, an Event naming the fix); a user who may
    not run its pods cannot have it checked, one who may can. With the configuration in place the create is
    refused while no operator answers (the webhook fails closed)."""
    operator.stop(hard=True)
    try:
        refused = api_failure(lambda: create_sweep(kube, namespace, sweep("refused")))
        assert f'failed calling webhook "{w.MUTATING_WEBHOOK}"' in refused
        with mutating_webhook_withheld(kube):
            create_sweep(kube, namespace, sweep("unchecked"))
    finally:
        start_again(operator)
    status = wait_sweep(
        kube, namespace, "unchecked", lambda s: s.get("phase") == "Pending" and _reason(s) == "NotAdmitted", "a hold"
    )
    running = next(c for c in status["conditions"] if c["type"] == "Running")
    assert "kubectl annotate trainingsweep <name> ml.example.com/admission=check" in running["message"]
    assert "NotAdmitted" in [reason for reason, _ in events_of(kube, namespace, "unchecked")]
    assert trials(kube, namespace, "unchecked") == []
    check = {"metadata": {"annotations": {k.ADMISSION_ANNOTATION: "check"}}}
    client, user = author(kube, namespace, "sweeps-only", SWEEPS_ONLY)
    with pytest.raises(ApiException) as caught:
        client.custom.patch_namespaced_custom_object(
            k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, "unchecked", check
        )
    assert caught.value.status == 403 and f"{user} may not create pods" in caught.value.body
    assert trials(kube, namespace, "unchecked") == []
    trainer, _ = author(kube, namespace, "trainer", [*SWEEPS_ONLY, PODS])
    trainer.custom.patch_namespaced_custom_object(
        k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, "unchecked", check
    )
    wait_until(lambda: len(trials(kube, namespace, "unchecked")) == 2, 120, "the trials once the sweep is checked")


def _reason(status: dict[str, Any]) -> str:
    running = next((c for c in status.get("conditions") or [] if c["type"] == "Running"), {})
    return str(running.get("reason") or "")
