"""A TrainingJob never grants more than its author could do directly (issue 41, finding 2), on the real API server
with the shipped RBAC: the mutating webhook asks the API server (SubjectAccessReview) whether the author may do
what the job's pods will do, and the operator creates pods only for a job whose admission stamp verifies.

Reproduced first: a ServiceAccount allowed only TrainingJobs (`kubectl auth can-i create pods` -> no, `get secrets`
-> no) got a privileged root worker with a hostPath volume, a toleration of every taint and a Secret through
secretKeyRef.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.admission_support import mutating_webhook_withheld
from tests.integration.v1_support import create, read, release, v1_job, wait_state
from tests.jobs import event_reasons, get_job, job_manifest, live_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO, RunningOperator, start_again, start_operator
from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.webhooks.tls import SECRET_NAME

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]
DENIED = f'admission webhook "{w.MUTATING_WEBHOOK}" denied the request: '


def author(kube: Kube, namespace: str, name: str, rules: list[dict[str, Any]]) -> tuple[Kube, str]:
    """A ServiceAccount of `namespace` allowed `rules` and nothing else: a client acting as it, and its user name."""
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    kube.rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    binding = {"metadata": {"name": name}, "subjects": [subject]}
    binding["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    kube.rbac.create_namespaced_role_binding(namespace, binding)
    token = kube.core.create_namespaced_service_account_token(name, namespace, {"spec": {"expirationSeconds": 3600}})
    return kube.with_token(token.status.token), f"system:serviceaccount:{namespace}:{name}"


JOBS_ONLY = [{"apiGroups": [c.GROUP], "resources": [c.PLURAL], "verbs": ["create", "get", "list", "watch", "patch"]}]
# v1 with an image: v1alpha1 needs the conversion webhook, and a v1 job without one the mutating webhook.
IMAGE = "registry.example/train:1"
PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}


def attack(name: str) -> dict[str, Any]:
    """The issue's job: a privileged root worker, the host's filesystem, every taint tolerated, a Secret in env."""
    return job_manifest(
        name,
        complete_after=None,
        env=[{"name": "LOOT", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
        volumes=[{"name": "host", "hostPath": {"path": "/"}}],
        volumeMounts=[{"name": "host", "mountPath": "/host"}],
        securityContext={"privileged": True, "runAsUser": 0},
        scheduling={"tolerations": [{"operator": "Exists"}]},
    )


def refusal(client: Kube, namespace: str, manifest: dict[str, Any], make: Callable[..., Any] = create) -> str:
    """The API server's message for a create (by `make`) the mutating webhook denies (403 Forbidden)."""
    with pytest.raises(ApiException) as caught:
        make(client, namespace, manifest)
    assert caught.value.status == 403, caught.value.body
    return json.loads(caught.value.body)["message"]


def test_permission_to_create_trainingjobs_is_not_permission_to_create_pods(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "db"}, "stringData": {"password": "s3cr3t"}})
    client, user = author(kube, namespace, "jobs-only", JOBS_ONLY)
    refused = refusal(client, namespace, attack("loot"))
    assert refused.startswith(DENIED), refused
    for missing in (
        f"{user} may not create pods in namespace {namespace} (the job runs pods)",
        f"{user} may not get secrets db in namespace {namespace} (its pods read it)",
        f"{user} may not use hostaccess (group ml.example.com) in namespace {namespace} (its pods ask for ",
    ):
        assert missing in refused, refused
    for ask in ("a privileged container", "a toleration of every taint", "hostPath volume host"):
        assert ask in refused, refused
    plain = refusal(client, namespace, job_manifest("plain", complete_after=None))
    assert f"{user} may not create pods in namespace {namespace}" in plain
    assert get_job(kube, namespace, "loot") is None and get_job(kube, namespace, "plain") is None


def test_what_the_author_may_do_the_job_may_do(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "db"}, "stringData": {"password": "s3cr3t"}})
    reads = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["db"]}
    client, user = author(kube, namespace, "trainer", [*JOBS_ONLY, PODS, reads])
    ordinary = job_manifest("ordinary", complete_after=None)
    ordinary["spec"]["env"] = attack("x")["spec"]["env"]
    create(client, namespace, ordinary)
    wait_phase(kube, namespace, "ordinary", "Running")
    refused = refusal(client, namespace, attack("host"))
    assert f"{user} may not use hostaccess" in refused and "may not create pods" not in refused
    host_access = yaml.safe_load((REPO / "deploy" / "rbac" / "host-access.yaml").read_text())
    binding = {
        "metadata": {"name": "host-access"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": host_access["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": "trainer", "namespace": namespace}],
    }
    kube.rbac.create_namespaced_role_binding(namespace, binding)
    # Answers are kept 10 s (webhooks/component.py REVIEW_TTL): the grant shows within that.
    wait_until(lambda: _created(client, namespace, attack("host")), 30, "the job with host access to be admitted")
    stored = get_job(kube, namespace, "host")
    assert stored["metadata"]["annotations"][c.ADMISSION_ANNOTATION].startswith("v1.")


def api_failure(call: Callable[[], Any]) -> str:
    """The API server's message for a call that must fail with a 5xx (a webhook it could not call)."""
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status >= 500, caught.value.body
    return json.loads(caught.value.body)["message"]


def _created(client: Kube, namespace: str, manifest: dict[str, Any]) -> bool:
    try:
        create(client, namespace, manifest)
    except ApiException as error:
        if "hostaccess" in str(error.body):
            return False
        raise
    return True


def test_a_job_stored_while_no_webhook_answered_is_held_until_checked(
    kube: Kube, namespace: str, operator: RunningOperator, tmp_path: Path
) -> None:
    """The mutating webhook fails closed, but its configuration may be removed or edited by hand, and an older
    install failed open: the operator holds a job nobody checked (no pods) until someone allowed to has it checked
    (here the admin, by setting the annotation the hold message names)."""
    operator.stop(hard=True)
    try:
        refused = api_failure(lambda: create(kube, namespace, v1_job("refused", numWorkers=2, image=IMAGE)))
        assert f'failed calling webhook "{w.MUTATING_WEBHOOK}"' in refused, "no operator: no create"
        with mutating_webhook_withheld(kube):
            create(kube, namespace, v1_job("unchecked", numWorkers=2, image=IMAGE))
    finally:
        start_again(operator)
    assert get_job(kube, namespace, "refused") is None
    held = wait_until(lambda: _blocked(kube, namespace, "unchecked"), 60, "the job to be held")
    assert held["reason"] == "NotAdmitted" and "kubectl annotate trainingjob" in held["message"]
    assert live_pods(kube, namespace, "unchecked") == []
    assert "NotAdmitted" in event_reasons(kube, namespace, "unchecked")
    patch = {"metadata": {"annotations": {c.ADMISSION_ANNOTATION: "check"}}}
    kube.custom.patch_namespaced_custom_object(c.GROUP, c.VERSION, namespace, c.PLURAL, "unchecked", patch)
    wait_phase(kube, namespace, "unchecked", "Running")
    assert len(live_pods(kube, namespace, "unchecked")) == 2
    release(kube, namespace, "unchecked")


def test_a_job_an_older_operator_ran_is_not_held_after_the_upgrade(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """An operator from before stamps ran the job (played by this one without its webhooks, --webhook-port 0: it
    signs nothing and holds nothing, no mutating webhook is configured, and the webhook Secret holds no admission
    key, as then; the upgraded operator makes one, dated now). After the upgrade
    the job is still reconciled (a deleted worker comes back, nothing Blocked), and a change that shapes no pod,
    by someone who may not create pods, gets it a stamp instead of a refusal or a hold."""
    operator.stop()
    try:
        unkeyed = {"data": {"admission.key": None, "admission.since": None}}
        kube.core.patch_namespaced_secret(SECRET_NAME, w.SERVICE_NAMESPACE, unkeyed)
        older = start_operator(operator.kubeconfig, operator.log_path, "--webhook-port", "0")
        try:
            with mutating_webhook_withheld(kube):
                create(kube, namespace, v1_job("legacy", numWorkers=2, image=IMAGE))
            wait_state(kube, namespace, "legacy", "Running")
        finally:
            older.stop()
    finally:
        start_again(operator)
    assert c.ADMISSION_ANNOTATION not in (_legacy(kube, namespace)["metadata"].get("annotations") or {})
    [first, _] = sorted(live_pods(kube, namespace, "legacy"), key=lambda pod: pod.metadata.name)
    kube.core.delete_namespaced_pod(first.metadata.name, namespace, grace_period_seconds=0)
    wait_until(lambda: _replaced(kube, namespace, first), 60, "the deleted worker to be created again")
    assert _blocked_condition(_legacy(kube, namespace)) is None
    client, _ = author(kube, namespace, "pauser", JOBS_ONLY)
    patch = {"spec": {"suspend": True}}
    client.custom.patch_namespaced_custom_object(c.GROUP, c.V1, namespace, c.PLURAL, "legacy", patch)
    wait_state(kube, namespace, "legacy", "Suspended")
    suspended = _legacy(kube, namespace)
    assert suspended["metadata"]["annotations"][c.ADMISSION_ANNOTATION].startswith("v1.")
    assert _blocked_condition(suspended) is None and "NotAdmitted" not in event_reasons(kube, namespace, "legacy")


def _replaced(kube: Kube, namespace: str, pod: Any) -> bool:
    return any(
        p.metadata.name == pod.metadata.name and p.metadata.uid != pod.metadata.uid
        for p in live_pods(kube, namespace, "legacy")
    )


def _legacy(kube: Kube, namespace: str) -> dict[str, Any]:
    """The job as v1, which needs no conversion webhook (none answers while the older operator runs)."""
    return read(kube, namespace, "legacy", c.V1) or {}


def _blocked(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return _blocked_condition(get_job(kube, namespace, name) or {})


def _blocked_condition(job: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond["type"] == "Blocked" and cond["status"] == "True"), None)
