"""Workers report progress with a real pod-bound token (TokenRequest); the operator authenticates each report
with TokenReview, lets only the job's own chief worker write, rejects bad bodies and coalesces bursts."""

from __future__ import annotations

import datetime
import json
import math
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.jobs import create_job, get_job, job_manifest, kubectl, live_pods, wait_phase
from tests.kube import Kube, restricted_pod, wait_until
from tests.operator_harness import RunningOperator
from trainingjob.api.times import parse_time
from trainingjob.operator.trainingjob.progress import PROGRESS_WRITE_INTERVAL
from trainingjob.progress.server import EndpointLimits

pytestmark = pytest.mark.integration
AUDIENCE = "trainingjob-progress"


def pod_token(kube: Kube, namespace: str, pod_name: str, audience: str = AUDIENCE) -> str:
    """What the kubelet would project into the worker: a token of its ServiceAccount bound to the pod."""
    pod = kube.core.read_namespaced_pod(pod_name, namespace)
    request = {
        "spec": {
            "audiences": [audience],
            "expirationSeconds": 600,
            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod_name, "uid": pod.metadata.uid},
        }
    }
    return kube.core.create_namespaced_service_account_token(
        pod.spec.service_account_name or "default", namespace, request
    ).status.token


def worker_ca(kube: Kube, namespace: str, job: str) -> ssl.SSLContext:
    """The CA the worker trusts: the one the operator put in the job's ConfigMap."""
    pem = kube.core.read_namespaced_config_map(f"{job}-config", namespace).data["progress-ca.crt"]
    with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as handle:
        handle.write(pem)
    return ssl.create_default_context(cafile=handle.name)


def post(
    operator: RunningOperator, context: ssl.SSLContext, namespace: str, job: str, token: str | None, body: bytes
) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{operator.progress_url}/v1/namespaces/{namespace}/trainingjobs/{job}/progress",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.fixture
def running_job(kube: Kube, namespace: str, operator: RunningOperator) -> str:
    create_job(kube, namespace, job_manifest("learner", workers=2, complete_after=None))
    wait_phase(kube, namespace, "learner", "Running")
    return "learner"


def test_worker_env_points_at_the_endpoint_with_a_bound_token(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    pod = live_pods(kube, namespace, running_job)[0]
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["TRAININGJOB_PROGRESS_URL"] == operator.progress_url
    assert env["TRAININGJOB_PROGRESS_CA_FILE"] == "/etc/trainingjob/progress-ca.crt"
    token_volume = next(v for v in pod.spec.volumes if v.name == "tj-progress-token")
    projected = token_volume.projected.sources[0].service_account_token
    assert (projected.audience, projected.path) == (AUDIENCE, "token")


def test_chief_report_updates_status_and_printer_columns(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator, cluster
) -> None:
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    # Timestamps have whole seconds: a report in the attempt's first second shows no pace yet, hence no ETA.
    attempt_start = parse_time(get_job(kube, namespace, running_job)["status"]["attemptStartTime"])
    wait_until(lambda: _utc_now() >= attempt_start + datetime.timedelta(seconds=2), 10, "a measurable pace")
    body = {
        "epoch": 3,
        "totalEpochs": 10,
        "metrics": {"loss": 0.42, "accuracy": 0.9},
        "checkpoint": {"epoch": 3, "path": "/checkpoints/ckpt-00000003"},
    }
    assert post(operator, context, namespace, running_job, token, json.dumps(body).encode())[0] == 202
    job = wait_until(lambda: _with_progress(kube, namespace, running_job), 30, "status.progress")
    progress = job["status"]["progress"]
    assert (progress["epoch"], progress["totalEpochs"], progress["percent"]) == (3, 10, 30.0)
    assert progress["metrics"] == {"loss": 0.42, "accuracy": 0.9}
    assert progress["lastUpdateTime"] and progress["recent"] == [{"percent": 30.0, "time": progress["lastUpdateTime"]}]
    assert "estimatedRemainingSeconds" not in progress  # one report: the pace is unknown (not guessed)
    assert job["status"]["lastCheckpoint"]["path"] == "/checkpoints/ckpt-00000003"
    table = kubectl(cluster, "get", "trainingjobs.v1alpha1.ml.example.com", running_job, "-n", namespace)
    header, row = table.splitlines()[:2]
    assert "PROGRESS" in header and "ETA" in header and "30" in row
    v1 = kubectl(cluster, "get", "tj", running_job, "-n", namespace).splitlines()  # kubectl's default: v1's columns
    assert v1[0].split()[:5] == ["NAME", "STATE", "PROGRESS", "EPOCH", "WORKERS"] and v1[1].split()[1:4] == [
        "Running",
        "30%",
        "3",
    ]


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _with_progress(kube: Kube, namespace: str, name: str) -> dict | None:
    job = get_job(kube, namespace, name) or {}
    return job if (job.get("status") or {}).get("progress") else None


def test_reports_that_must_be_refused(kube: Kube, namespace: str, running_job: str, operator: RunningOperator) -> None:
    create_job(kube, namespace, job_manifest("other", complete_after=None))
    wait_phase(kube, namespace, "other", "Running")
    context = worker_ca(kube, namespace, running_job)
    good = json.dumps({"epoch": 1, "totalEpochs": 2}).encode()
    before = get_job(kube, namespace, running_job)["metadata"]["resourceVersion"]
    cases = {
        "no token": (None, good, 401),
        "garbage token": ("not-a-token", good, 401),
        "wrong audience": (
            pod_token(
                kube, namespace, f"{running_job}-worker-0", audience="https://kubernetes.default.svc.cluster.local"
            ),
            good,
            401,
        ),
        "another job's pod": (pod_token(kube, namespace, "other-worker-0"), good, 403),
        "a worker that may not report": (pod_token(kube, namespace, f"{running_job}-worker-1"), good, 403),
        "malformed JSON": (pod_token(kube, namespace, f"{running_job}-worker-0"), b"{epoch: 1", 400),
        "epoch past total": (
            pod_token(kube, namespace, f"{running_job}-worker-0"),
            json.dumps({"epoch": 5, "totalEpochs": 2}).encode(),
            400,
        ),
        "oversized": (pod_token(kube, namespace, f"{running_job}-worker-0"), b" " * (17 * 1024), 413),
    }
    for name, (token, body, expected) in cases.items():
        status, answer = post(operator, context, namespace, running_job, token, body)
        assert status == expected, f"{name}: {status} {answer}"
        assert answer.get("reason"), name
    assert get_job(kube, namespace, running_job)["metadata"]["resourceVersion"] == before


def test_a_pod_with_the_jobs_labels_but_not_controlled_by_the_job_is_refused(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    """Anyone who may create pods can copy worker 0's labels; only the job's controller reference makes a worker.

    The copies are exact (spec hash included): the operator must neither take one for worker 0 nor delete it,
    and the endpoint must refuse its reports for its owner.
    """
    context = worker_ca(kube, namespace, running_job)
    real_uid = kube.core.read_namespaced_pod(f"{running_job}-worker-0", namespace).metadata.uid
    owner = kube.core.create_namespaced_config_map(namespace, {"metadata": {"name": "someone-else"}})
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else", "uid": owner.metadata.uid}
    impostors = (("impostor-unowned", []), ("impostor-foreign", [{**foreign, "controller": True}]))
    for name, owners in impostors:
        token = _impostor_token(kube, namespace, running_job, name, owners, operator)
        status, answer = post(operator, context, namespace, running_job, token, json.dumps({"epoch": 1}).encode())
        assert (status, answer["reason"]) == (403, f"pod {name} is not controlled by this job"), name
    assert not ((get_job(kube, namespace, running_job) or {}).get("status") or {}).get("progress")
    assert kube.core.read_namespaced_pod(f"{running_job}-worker-0", namespace).metadata.uid == real_uid
    for name, _ in impostors:
        assert kube.core.read_namespaced_pod(name, namespace).metadata.deletion_timestamp is None, name


def _impostor_token(
    kube: Kube, namespace: str, job: str, name: str, owners: list[dict], operator: RunningOperator
) -> str:
    """A pod of someone else's labelled exactly like worker 0 of `job`, and a token bound to it, once the
    operator's cache holds it (so a refusal is for its owner, not for being unknown).

    The cache is seen through the endpoint itself: a pod it does not know yet is refused as "not a worker of this
    job", one it knows as "not controlled by this job". (Counting cached workers instead raced with the pods of
    earlier tests leaving the cache.)
    """
    real = kube.core.read_namespaced_pod(f"{job}-worker-0", namespace)
    manifest = restricted_pod(name)
    manifest["metadata"].update(ownerReferences=owners, labels=dict(real.metadata.labels))
    kube.core.create_namespaced_pod(namespace, manifest)
    token = pod_token(kube, namespace, name)
    context = worker_ca(kube, namespace, job)
    unknown = f"pod {name} is not a worker of this job"

    def cached() -> bool:
        status, answer = post(operator, context, namespace, job, token, json.dumps({"epoch": 1}).encode())
        return not (status == 403 and answer.get("reason") == unknown)

    wait_until(cached, 60, f"the operator's cache to hold {name}", interval=1)
    return token


def test_token_of_a_deleted_pod_is_refused(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    context = worker_ca(kube, namespace, running_job)
    name = f"{running_job}-worker-0"
    token = pod_token(kube, namespace, name)
    deleted_uid = kube.core.read_namespaced_pod(name, namespace).metadata.uid
    kube.core.delete_namespaced_pod(name, namespace)

    def gone_or_replaced() -> bool:
        pod = kube.pod_or_none(namespace, name)  # read once: the pod may vanish between two reads
        return pod is None or pod.metadata.uid != deleted_uid

    wait_until(gone_or_replaced, 30, "the pod to go")
    status, _ = post(operator, context, namespace, running_job, token, json.dumps({"epoch": 1}).encode())
    assert status in (401, 403)


def test_a_burst_of_reports_gives_at_most_a_few_status_writes(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator
) -> None:
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    versions: set[str] = set()
    stop = threading.Event()

    def watch_versions() -> None:
        while not stop.is_set():
            versions.add(get_job(kube, namespace, running_job)["metadata"]["resourceVersion"])

    watcher = threading.Thread(target=watch_versions, daemon=True)
    before = get_job(kube, namespace, running_job)["metadata"]["resourceVersion"]
    watcher.start()
    started = time.monotonic()
    burst = EndpointLimits().pod_burst  # what one pod may send at once; beyond it comes 429 (tested below)
    for step in range(1, burst + 1):
        body = json.dumps({"step": step, "totalSteps": burst, "metrics": {"loss": 1.0 / step}}).encode()
        assert post(operator, context, namespace, running_job, token, body)[0] == 202
    final = wait_until(lambda: _at_step(kube, namespace, running_job, burst), 30, "the newest report in status")
    stop.set()
    watcher.join(timeout=10)
    versions.add(final["metadata"]["resourceVersion"])
    burst_seconds = time.monotonic() - started
    writes = len(versions - {before})
    # At most one progress write per job per PROGRESS_WRITE_INTERVAL (3 s), whatever else triggers a reconcile:
    # all writes fall inside the measured window, so this bound holds exactly however long a loaded machine
    # stretches the burst (2 writes for a 3-6 s burst, not one per reconcile).
    allowed = math.floor(burst_seconds / PROGRESS_WRITE_INTERVAL) + 1
    assert 1 <= writes <= allowed, f"{writes} status writes for {burst} reports in {burst_seconds:.1f}s"
    assert final["status"]["progress"]["percent"] == 100.0


def _at_step(kube: Kube, namespace: str, name: str, step: int) -> dict | None:
    job = get_job(kube, namespace, name) or {}
    return job if ((job.get("status") or {}).get("progress") or {}).get("step") == step else None


def test_sdk_reports_through_the_endpoint(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator, tmp_path: Path
) -> None:
    from trainingjob.sdk import ProgressReporter

    ca = tmp_path / "ca.crt"
    ca.write_text(kube.core.read_namespaced_config_map(f"{running_job}-config", namespace).data["progress-ca.crt"])
    token = tmp_path / "token"
    token.write_text(pod_token(kube, namespace, f"{running_job}-worker-0"))
    env = {
        "TRAININGJOB_PROGRESS_URL": operator.progress_url,
        "TRAININGJOB_PROGRESS_CA_FILE": str(ca),
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token),
        "TRAININGJOB_NAME": running_job,
        "TRAININGJOB_NAMESPACE": namespace,
        "TRAININGJOB_WORKER_INDEX": "0",
    }
    reporter = ProgressReporter(env=env)
    assert reporter.report_progress(epoch=7, total_epochs=8, metrics={"loss": 0.1}) is True
    assert reporter.flush(timeout=15) is True  # sent from the background thread and accepted
    wait_until(
        lambda: (
            ((get_job(kube, namespace, running_job) or {}).get("status", {}).get("progress") or {}).get("epoch") == 7
        ),
        30,
        "the SDK's report in status",
    )


def resigned(token: str, signing_key: Path, expires_in: int) -> str:
    """The same pod-bound token with its lifetime moved (negative: already expired), signed with the cluster's
    ServiceAccount key.

    TokenRequest refuses lifetimes under 10 minutes, so waiting for a real token to expire is not an option; the
    local cluster's signing key makes a token the API server would have issued an hour earlier.
    """
    import base64
    import time as clock

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding

    def decode(part: str) -> dict:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))

    def encode(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()

    header, payload, _ = token.split(".")
    claims = decode(payload)
    now = int(clock.time())
    claims.update({"iat": now - 7200, "nbf": now - 7200, "exp": now + expires_in})
    signing_input = f"{header}.{encode(claims)}"
    key = serialization.load_pem_private_key(signing_key.read_bytes(), password=None)
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def test_an_expired_token_is_refused(
    kube: Kube, namespace: str, running_job: str, operator: RunningOperator, cluster
) -> None:
    signing_key = Path(cluster.kubeconfig).parent / "pki" / "sa.key"
    if not signing_key.exists():
        pytest.skip("needs the local cluster's ServiceAccount signing key")
    context = worker_ca(kube, namespace, running_job)
    token = pod_token(kube, namespace, f"{running_job}-worker-0")
    body = json.dumps({"epoch": 1, "totalEpochs": 2}).encode()
    assert post(operator, context, namespace, running_job, resigned(token, signing_key, -3600), body)[0] == 401
    # The re-signing itself is sound: the same claims re-signed with a valid lifetime are accepted.
    assert post(operator, context, namespace, running_job, resigned(token, signing_key, 3600), body)[0] == 202
