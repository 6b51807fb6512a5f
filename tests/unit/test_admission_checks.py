"""What the mutating webhook asks the API server before it stamps a job (webhooks/authorization.py), and the
stamp it adds or keeps (webhooks/stamping.py), with a fake SubjectAccessReview; and the reconciler holding a job
without one (issue 41, finding 2). The real API server's answers are in tests/integration/test_admission_rbac.py."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.fake_api import FakeApiServer, fake_applier
from tests.unit.test_apply import CONFIG, NS, job_body, settle
from tests.unit.test_planner import NOW
from trainingjob.api import constants as k
from trainingjob.api.types import TrainingJob
from trainingjob.operator.trainingjob.reconciler import Reconciler
from trainingjob.reconcile.admission import ANNOTATION, sign, stamp_problem
from trainingjob.webhooks.admission import AdmissionRequest, UserInfo, Verdict
from trainingjob.webhooks.authorization import Access, host_access, required_access
from trainingjob.webhooks.stamping import admit

KEY = b"k" * 32
ALICE = UserInfo("alice", "u-alice", ("team",))


class Reviewer:
    """Allows what `allowed` lists ((verb, resource, name) triples; name "" for any); records every question."""

    def __init__(self, *allowed: tuple[str, str, str], fail: bool = False) -> None:
        self.allowed = set(allowed)
        self.asked: list[Access] = []
        self.fail = fail

    async def allows(self, user: UserInfo, access: Access) -> bool:
        self.asked.append(access)
        if self.fail:
            raise ApiException(status=503, reason="unavailable")
        return (access.verb, access.resource, access.name) in self.allowed or (
            access.verb,
            access.resource,
            "",
        ) in self.allowed


def spec(**extra: Any) -> dict[str, Any]:
    return {"framework": "pytorch", "image": "img:1", "command": ["python"], "workers": 2, **extra}


def body(fields: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    meta = {"name": "train", "namespace": "ml", **metadata}
    return {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": meta, "spec": fields}


ATTACK = spec(
    env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db-password", "key": "password"}}}],
    volumes=[
        {"name": "root", "hostPath": {"path": "/"}},
        {"name": "settings", "configMap": {"name": "team-settings"}},
    ],
    volumeMounts=[{"name": "root", "mountPath": "/host"}],
    securityContext={"privileged": True, "runAsUser": 0},
    scheduling={"tolerations": [{"operator": "Exists"}]},
)


def job(fields: dict[str, Any]) -> TrainingJob:
    return TrainingJob.from_body(body(fields))


def test_a_plain_job_needs_only_create_pods() -> None:
    assert [access.words() for access, _ in required_access(job(spec()), CONFIG)] == ["create pods in namespace ml"], (
        "the job's own ConfigMap is the operator's"
    )


def test_the_issues_attack_needs_secrets_configmaps_and_host_access() -> None:
    needed = {access.words(): why for access, why in required_access(job(ATTACK), CONFIG)}
    assert set(needed) == {
        "create pods in namespace ml",
        "get secrets db-password in namespace ml",
        "get configmaps team-settings in namespace ml",
        "use hostaccess (group ml.example.com) in namespace ml",
    }
    why = needed["use hostaccess (group ml.example.com) in namespace ml"]
    for ask in ("a privileged container", "hostPath volume root", "a toleration of every taint"):
        assert ask in why


@pytest.mark.parametrize(
    ("pod_spec", "ask"),
    [
        ({"hostNetwork": True}, "the host's Network namespace"),
        ({"containers": [{"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}, "capabilities SYS_ADMIN"),
        ({"containers": [{"securityContext": {"allowPrivilegeEscalation": True}}]}, "privilege escalation"),
        ({"containers": [{"ports": [{"containerPort": 80, "hostPort": 80}]}]}, "host port 80"),
        ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "an unconfined seccomp profile"),
        ({"tolerations": [{"key": "node-role.kubernetes.io/control-plane"}]}, "a toleration of node-role"),
    ],
)
def test_what_a_pod_asks_of_the_node(pod_spec: dict[str, Any], ask: str) -> None:
    assert any(ask in found for found in host_access({"spec": pod_spec}))


def test_the_operators_own_defaults_ask_nothing_of_the_node() -> None:
    for fields in (spec(), spec(scheduling={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})):
        assert not any(a.resource == "hostaccess" for a, _ in required_access(job(fields), CONFIG))


def request(obj: dict[str, Any], old: dict[str, Any] | None = None, user: UserInfo = ALICE) -> AdmissionRequest:
    return AdmissionRequest("u1", "UPDATE" if old else "CREATE", "ml", "train", obj, old, version=k.VERSION, user=user)


def admitted(req: AdmissionRequest, reviewer: Reviewer) -> Verdict:
    return asyncio.run(admit(req, Verdict(), KEY, reviewer, CONFIG, NOW, since=NOW))


def test_an_author_without_the_rights_is_denied_with_each_one_named() -> None:
    verdict = admitted(request(body(ATTACK)), Reviewer(("create", "pods", "")))
    assert not verdict.allowed and verdict.patch == []
    assert "alice may not get secrets db-password in namespace ml (its pods read it)" in (verdict.message or "")
    assert "alice may not use hostaccess (group ml.example.com) in namespace ml" in (verdict.message or "")
    assert "create pods" not in (verdict.message or "")


def test_an_author_with_the_rights_gets_a_stamp_that_verifies() -> None:
    verdict = admitted(request(body(spec())), Reviewer(("create", "pods", "")))
    assert verdict.allowed
    [operation] = verdict.patch
    assert operation["path"] == "/metadata/annotations"
    stored = body(spec(), uid="uid-1", creationTimestamp="2026-11-22T12:00:01Z")
    assert stamp_problem(KEY, TrainingJob.from_body(stored), operation["value"]) is None


def test_when_the_api_server_cannot_answer_nothing_is_stamped() -> None:
    verdict = admitted(request(body(spec())), Reviewer(fail=True))
    assert not verdict.allowed and "could not check your permissions" in (verdict.message or "")


def stored_with_stamp() -> dict[str, Any]:
    first = admitted(request(body(spec())), Reviewer(("create", "pods", "")))
    old = body(spec(), uid="uid-1", creationTimestamp="2026-11-22T12:00:01Z")
    old["metadata"]["annotations"] = {"team": "a", **first.patch[0]["value"]}
    return old


def test_a_change_that_shapes_no_pod_keeps_the_stamp_and_asks_nothing() -> None:
    """Suspending needs no right to create pods; a stamp a request dropped is put back."""
    old = stored_with_stamp()
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    del new["metadata"]["annotations"][ANNOTATION]
    reviewer = Reviewer()
    verdict = admitted(request(new, old, UserInfo("bob")), reviewer)
    assert verdict.allowed and reviewer.asked == []
    assert verdict.patch == [
        {
            "op": "add",
            "path": "/metadata/annotations/ml.example.com~1admission",
            "value": old["metadata"]["annotations"][ANNOTATION],
        }
    ]


def test_a_job_an_older_operator_ran_gets_a_stamp_for_a_change_that_shapes_no_pod() -> None:
    """A job reconciled at its generation before stamps existed: suspending it needs no right to create pods, and
    the stamp it gets then keeps it from being held at its new generation; a change of its pods is checked."""
    old = body(spec(), uid="uid-1", creationTimestamp="2026-01-01T00:00:00Z")
    old["metadata"]["generation"] = 3
    old["status"] = {"phase": "Running", "observedGeneration": 3}
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    reviewer = Reviewer()
    verdict = admitted(request(suspended, old, UserInfo("bob")), reviewer)
    assert verdict.allowed and reviewer.asked == []
    [operation] = verdict.patch
    suspended["metadata"]["generation"] = 4
    assert stamp_problem(KEY, TrainingJob.from_body(suspended), operation["value"]) is None
    never_planned = copy.deepcopy(old)
    never_planned["status"] = {"phase": "Running", "observedGeneration": 2}
    # Not admitted, and nothing asked of its pods or stamp: it passes unstamped and stays held, and nobody is
    # checked (the operator's own suspends, a stopped trial or Kueue's decision, never stamp on its rights).
    unchecked = Reviewer()
    passed = admitted(request(suspended, never_planned, UserInfo("bob")), unchecked)
    assert passed.allowed and passed.patch == [] and unchecked.asked == []
    asked = copy.deepcopy(suspended)
    asked["metadata"]["annotations"] = {ANNOTATION: "check"}
    assert not admitted(request(asked, never_planned, UserInfo("bob")), Reviewer()).allowed, "a check is a check"
    reshaped = copy.deepcopy(old)
    reshaped["spec"]["image"] = "other:2"
    assert not admitted(request(reshaped, old, UserInfo("bob")), Reviewer()).allowed


def test_a_change_of_the_pods_is_checked_again_as_its_author() -> None:
    old = stored_with_stamp()
    new = copy.deepcopy(old)
    new["spec"]["image"] = "other:2"
    verdict = admitted(request(new, old, UserInfo("bob")), Reviewer())
    assert not verdict.allowed and "bob may not create pods in namespace ml" in (verdict.message or "")


def test_a_forged_observed_generation_admits_nothing_created_since_stamping_began() -> None:
    """Whoever may write trainingjobs/status can set observedGeneration on any job: for a job created after the
    operators began stamping it is no evidence that one reconciled it, so a shape-preserving change is no stamp."""
    old = body(spec(), uid="uid-1", creationTimestamp="2026-11-28T12:00:30Z")  # after NOW, when stamping began
    old["metadata"]["generation"] = 3
    old["status"] = {"phase": "Running", "observedGeneration": 3}
    suspended = copy.deepcopy(old)
    suspended["spec"]["suspend"] = True
    verdict = admitted(request(suspended, old, UserInfo("bob")), Reviewer(("create", "pods", "")))
    assert verdict.allowed and verdict.patch == [], "passes unstamped: still held"


def test_the_reconciler_creates_no_pod_for_a_job_without_a_stamp_and_holds_it() -> None:
    async def scenario() -> tuple[FakeApiServer, FakeApiServer]:
        unstamped = FakeApiServer()
        forged = job_body()  # an observedGeneration written by whoever may write status, on a job made since
        forged["metadata"].update(creationTimestamp="2026-11-22T12:00:01Z", generation=1)
        forged["status"] = {"phase": "Running", "observedGeneration": 1}
        unstamped.add_job(forged)
        config = dataclasses.replace(CONFIG, admission_key=KEY, admission_since=NOW - datetime.timedelta(days=30))
        held = Reconciler(unstamped.indexes(NS), fake_applier(unstamped), config, clock=lambda: NOW)
        await settle(held, unstamped)
        stamped = FakeApiServer()
        with_stamp = job_body()
        with_stamp["metadata"].update(creationTimestamp="2026-11-22T12:00:01Z")
        with_stamp["metadata"]["annotations"] = {ANNOTATION: sign(KEY, TrainingJob.from_body(with_stamp), "", NOW)}
        stamped.add_job(with_stamp)
        running = Reconciler(stamped.indexes(NS), fake_applier(stamped), config, clock=lambda: NOW)
        await settle(running, stamped)
        return unstamped, stamped

    unstamped, stamped = asyncio.run(scenario())
    assert unstamped.pods == {}, "no pod for a job nobody checked"
    status = unstamped.jobs["job"]["status"]
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Blocked"] == ["NotAdmitted"]
    assert status["observedGeneration"] == 1 and unstamped.events.count("NotAdmitted") == 1
    assert set(stamped.pods) == {"job-worker-0", "job-worker-1"}, "a stamped job runs"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("counts", [{"workers": 10**12}, {"framework": "mpi", "workers": 10**12}])
def test_a_count_beyond_the_schema_is_left_unstamped_without_building_its_pods(counts: dict[str, Any]) -> None:
    """The mutating webhook runs before the schema's check; building the author's pod for `workers: 10**12` (one
    peer host name per pod) held the operator's event loop until its Lease ended the process. Unstamped and
    unasked, the API server then refuses it with the schema's maximum."""
    reviewer = Reviewer(("create", "pods", ""))
    verdict = admitted(request(body(spec(**counts))), reviewer)
    assert verdict.allowed and verdict.patch == [] and reviewer.asked == []
    edge = admitted(request(body(spec(workers=k.MAX_WORKERS))), reviewer)
    assert len(edge.patch) == 1 and reviewer.asked, "the schema's maximum itself is checked and stamped"
