"""What changes around running jobs must not restart them, and the defaults must fit the namespace they run in.

- A CRD update that adds a defaulted field under running jobs (the API server then serves every stored job with
  it, without a new generation) restarts no worker, not even together with a later policy edit.
- Workers get runAsNonRoot only where the namespace enforces PodSecurity restricted; a namespace that starts
  enforcing it is learnt from PodSecurity's refusal (the job is not failed).
- `tj operator` whose namespace is missing, or whose RBAC is missing, says so in one line and exits 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.crd_support import create_or_replace_crd, install_crd
from tests.integration.test_blocked_workers import REACT
from tests.jobs import create_job, get_job, job_manifest, live_pods, patch_job, wait_phase
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO, RunningOperator
from trainingjob.api import constants as k
from trainingjob.api.schema import crd_manifest
from trainingjob.api.schema_builders import string

pytestmark = pytest.mark.integration
ADDED = "addedByANewerCrd"


def uids(kube: Kube, namespace: str, name: str) -> dict[str, str]:
    return {p.metadata.name: p.metadata.uid for p in live_pods(kube, namespace, name)}


@pytest.fixture
def crd_with_a_new_default(kube: Kube, trainingjob_crd: None, namespace: str) -> Iterator[None]:
    """The CRD as a newer release might ship it: one more spec field, with a default. Restored afterwards.

    Returns once the API server serves TrainingJobs from the new schema's storage: it tears the old one down (and
    closes every watch on it, the operator's too) about a second after the update; a watch of ours tells when.
    """
    manifest = crd_manifest(added_spec_fields={ADDED: string("A field of a newer release.", default="on")})
    watch_closed = threading.Event()

    def watch_until_closed() -> None:
        stream = kube.custom.list_namespaced_custom_object(
            k.GROUP, k.VERSION, namespace, k.PLURAL, watch=True, timeout_seconds=300, _preload_content=False
        )
        for _ in stream:
            pass
        watch_closed.set()

    watcher = threading.Thread(target=watch_until_closed, daemon=True)
    watcher.start()
    # Keeps the conversion webhook the running operator points at: the shipped one (127.0.0.1:9443) has no listener
    # here, and every read of a version other than the stored one would fail.
    create_or_replace_crd(kube, manifest, keep_conversion=True)
    try:
        assert watch_closed.wait(REACT), "the API server kept serving the old schema's storage"
        yield
    finally:
        install_crd(kube)


def served_with_default(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    job = get_job(kube, namespace, name)
    return job if (job or {}).get("spec", {}).get(ADDED) == "on" else None


@pytest.mark.usefixtures("operator")
def test_a_crd_update_adding_a_default_restarts_no_running_job(
    kube: Kube, namespace: str, request: pytest.FixtureRequest
) -> None:
    create_job(kube, namespace, job_manifest("steady", workers=2, complete_after=None))
    before = wait_phase(kube, namespace, "steady", "Running", timeout=REACT)
    pods = uids(kube, namespace, "steady")
    request.getfixturevalue("crd_with_a_new_default")
    job = wait_until(lambda: served_with_default(kube, namespace, "steady"), REACT, "the new default to be served")
    assert job["metadata"]["generation"] == before["metadata"]["generation"], "defaulting is not an edit"
    # The operator's watch was closed with the old storage; whatever it sees of the job from now on is served with
    # the new default. An edit of a policy field makes it write status for the job so served.
    patch_job(kube, namespace, "steady", {"spec": {"backoffLimit": 5}})
    generation = before["metadata"]["generation"] + 1
    job = wait_until(
        lambda: (j := get_job(kube, namespace, "steady"))["status"].get("observedGeneration") == generation and j,
        REACT,
        "the operator to act on the edited job",
    )
    assert job["status"]["phase"] == "Running" and job["status"].get("attempt", 0) == 0
    assert job["status"]["workerSpec"]["generation"] == generation
    assert uids(kube, namespace, "steady") == pods, "no worker was recreated"


@pytest.fixture
def open_namespace(kube: Kube) -> Iterator[str]:
    """A namespace without any PodSecurity label (the common case on real clusters)."""
    name = f"t-open-{uuid.uuid4().hex[:8]}"
    kube.core.create_namespace({"metadata": {"name": name, "labels": {"ml.example.com/test": "true"}}})
    wait_until(lambda: kube.has_service_account(name, "default"), REACT, "the namespace's default ServiceAccount")
    yield name
    kube.core.delete_namespace(name)


def run_as_non_root(pod: Any) -> tuple[Any, Any]:
    pod_level = pod.spec.security_context.run_as_non_root if pod.spec.security_context else None
    return pod_level, pod.spec.containers[0].security_context.run_as_non_root


@pytest.mark.usefixtures("operator")
def test_root_images_can_start_where_restricted_is_not_enforced(kube: Kube, open_namespace: str) -> None:
    create_job(kube, open_namespace, job_manifest("rooty", workers=2, complete_after=None))
    wait_phase(kube, open_namespace, "rooty", "Running", timeout=REACT)
    for pod in live_pods(kube, open_namespace, "rooty"):
        assert run_as_non_root(pod) == (None, None)
        security = pod.spec.containers[0].security_context
        assert security.allow_privilege_escalation is False and security.capabilities.drop == ["ALL"]
        assert security.seccomp_profile.type == "RuntimeDefault"


@pytest.mark.usefixtures("operator")
def test_restricted_namespaces_get_run_as_non_root(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("strict", complete_after=None))
    wait_phase(kube, namespace, "strict", "Running", timeout=REACT)
    assert run_as_non_root(live_pods(kube, namespace, "strict")[0]) == (True, True)


@pytest.mark.usefixtures("operator")
def test_a_namespace_that_starts_enforcing_restricted_is_learnt_not_failed(kube: Kube, open_namespace: str) -> None:
    create_job(kube, open_namespace, job_manifest("first", complete_after=None))
    wait_phase(kube, open_namespace, "first", "Running", timeout=REACT)  # the operator has read: not restricted
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    kube.core.patch_namespace(open_namespace, {"metadata": {"labels": labels}})
    create_job(kube, open_namespace, job_manifest("second", complete_after=None))
    job = wait_phase(kube, open_namespace, "second", "Running", timeout=REACT)
    assert not any(c["type"] == "Failed" for c in job["status"]["conditions"])
    assert run_as_non_root(live_pods(kube, open_namespace, "second")[0]) == (True, True)


def run_operator(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "trainingjob.cli", "operator", "--all-namespaces", *args]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO, env=env, check=False)


def test_a_missing_operator_namespace_is_one_line_and_exit_1(cluster: Any, trainingjob_crd: None) -> None:
    result = run_operator(cluster.kubeconfig, "--leader-election-namespace", "no-such-namespace")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: namespace no-such-namespace does not exist (the operator keeps its Lease there): apply deploy/ "
        "(kubectl apply -k deploy/), or run with --leader-election-namespace NS of an existing one"
    ]


def test_missing_rbac_is_one_line_and_exit_1(operator: RunningOperator, trainingjob_crd: None) -> None:
    """The operator's own account may create Leases only in trainingjob-system."""
    result = run_operator(operator.kubeconfig, "--leader-election-namespace", "default")
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: the operator may not create Leases in namespace default") and "deploy/rbac" in line


def test_without_leader_election_the_progress_secret_is_checked(cluster: Any, trainingjob_crd: None) -> None:
    args = ("--no-leader-elect", "--progress-port", "18443", "--leader-election-namespace", "no-such-namespace")
    result = run_operator(cluster.kubeconfig, *args)
    assert result.returncode == 1
    assert "namespace no-such-namespace does not exist (the operator keeps its Secret there)" in result.stderr
