"""Shared fixtures: one real local control plane per test session and a fresh namespace per test.

Set TJ_USE_EXISTING_CLUSTER=true (with KUBECONFIG) to run against a cluster you already have, like envtest's
USE_EXISTING_CLUSTER; set TJ_KEEP_CLUSTER=true to leave the session's cluster running for the next run, and
TJ_TEST_CLUSTER=NAME to use a local cluster other than this checkout's own ("pytest-" and a hash of its path).
"""

from __future__ import annotations

import hashlib
import os
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kube import Kube, wait_until

# Several test runs can share a machine (developers, helpers): each checkout gets a cluster of its own by default
# (two checkouts sharing one cluster would run two operators on one Lease, and the first to finish would tear the
# cluster down under the other); TJ_TEST_CLUSTER picks one explicitly.
# Under pytest-xdist (`make test` runs two workers) each worker is a session of its own: a cluster of its own too,
# named after the worker (gw0, gw1), so one worker's tests never see the other's operator, CRDs or Kueue.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_CLUSTER_NAME = os.environ.get("TJ_TEST_CLUSTER") or (
    "pytest-"
    + hashlib.sha1(str(Path(__file__).resolve().parents[1]).encode()).hexdigest()[:6]
    + (f"-{_XDIST_WORKER}" if _XDIST_WORKER else "")
)
# Beside the 4 kwok nodes, local process nodes where pods really run (tests/local_node.py targets them), each
# with 2 fake GPUs (labelled fake; the real allocation path: tests/integration/test_local_node_gpus.py).
LOCAL_NODES = 2
LOCAL_NODE_GPUS = "fake:2"


@dataclass(frozen=True)
class ClusterUnderTest:
    kubeconfig: Path
    kubectl: str
    started_here: bool


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterUnderTest]:
    shared = _truthy("TJ_USE_EXISTING_CLUSTER") or os.environ.get("TJ_TEST_CLUSTER")
    if shared and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1) > 1:
        pytest.fail(
            "one named or existing cluster cannot serve several pytest-xdist workers (two operators would share "
            "its Lease and webhooks): run with -n 0, or `make test TEST_WORKERS=0`"
        )
    if _truthy("TJ_USE_EXISTING_CLUSTER"):
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            pytest.fail("TJ_USE_EXISTING_CLUSTER is set but KUBECONFIG is not")
        yield ClusterUnderTest(Path(kubeconfig), os.environ.get("TJ_KUBECTL", "kubectl"), started_here=False)
        return
    from trainingjob.cluster import control_plane

    already_running = control_plane.ClusterState.load(TEST_CLUSTER_NAME)
    reuse = already_running is not None and control_plane.is_up(already_running)
    state = control_plane.up(TEST_CLUSTER_NAME, nodes=4, local_nodes=LOCAL_NODES, local_node_gpus=LOCAL_NODE_GPUS)
    yield ClusterUnderTest(state.kubeconfig, state.binaries["kubectl"], started_here=not reuse)
    if not reuse and not _truthy("TJ_KEEP_CLUSTER"):
        control_plane.down(TEST_CLUSTER_NAME)


@pytest.fixture(scope="session")
def kube(cluster: ClusterUnderTest) -> Kube:
    return Kube(cluster.kubeconfig)


@pytest.fixture(scope="session")
def installed_crd(kube: Kube) -> None:
    """The TrainingJob CRD and webhook configurations installed from the Python sources (the single source)."""
    from tests.crd_support import install_crd

    install_crd(kube)


@pytest.fixture(scope="session")
def trainingjob_crd(installed_crd: None, operator) -> None:
    """The CRD served in every version: v1 is stored, so reading or writing v1alpha1 goes through the conversion
    webhook, which the session's operator serves."""


@pytest.fixture(scope="session")
def operator(cluster: ClusterUnderTest, kube: Kube, installed_crd: None, tmp_path_factory: pytest.TempPathFactory):
    """The operator running as a subprocess under the shipped RBAC (a ServiceAccount token, not admin); it serves
    the webhooks and points the API server at them."""
    from tests.crd_support import apply_manifests, service_account_kubeconfig
    from tests.operator_harness import REPO, start_operator, stop_all

    apply_manifests(cluster.kubectl, cluster.kubeconfig, REPO / "deploy" / "rbac")
    directory = tmp_path_factory.mktemp("operator")
    kubeconfig = service_account_kubeconfig(kube, directory / "operator.kubeconfig")
    extra = ("--log-level", "DEBUG") if _truthy("TJ_OPERATOR_DEBUG") else ()
    running = start_operator(kubeconfig, directory / "operator.log", *extra)
    yield running
    running.stop()
    stop_all()
    print(f"operator log: {running.log_path}")


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A namespace of its own for each test, enforcing PodSecurity `restricted`, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.core.create_namespace(
        {
            "metadata": {
                "name": name,
                "labels": {"pod-security.kubernetes.io/enforce": "restricted", "ml.example.com/test": "true"},
            }
        }
    )
    wait_until(lambda: kube.has_service_account(name, "default"), 60, "the namespace's default ServiceAccount")
    yield name
    kube.core.delete_namespace(name)


@pytest.fixture(autouse=True)
def session_operator_running(request: pytest.FixtureRequest) -> None:
    """Before each test that uses the session's operator: if it exited on its own (it does when it loses its Lease),
    or runs while the API server's conversion webhook has stopped answering, start it again, as a kubelet would,
    and say so in the run's warnings and summary. One a test stopped (RunningOperator.stop) is left alone: that test
    or its fixture runs and restores an operator itself."""
    if "operator" not in request.fixturenames:
        return
    from tests.operator_harness import restore_webhooks, revive

    operator = request.getfixturevalue("operator")
    revived = revive(operator)
    if revived is not None:
        code, last_line = revived
        warnings.warn(f"the session's operator had exited with code {code} ({last_line}); started again", stacklevel=1)
    restored = restore_webhooks(request.getfixturevalue("kube"), operator)
    if restored is not None:
        warnings.warn(f"{restored}: the session's operator was restarted", stacklevel=1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test that had a namespace reports what was in it (tests/failure_report.py)."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    from tests.failure_report import describe

    state = describe(getattr(item, "funcargs", {}), item.nodeid)
    if state:
        report.sections.append(("state of the test's namespace at the failure", state))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """At the very end of the output (all CI shows of a long run): how often the session's operator had to be
    started again and why, and its state at the first failed test (one dead webhook fails every later test with
    the same 500, and the first failure is where to look)."""
    from tests import failure_report, operator_harness

    if operator_harness.REVIVALS:
        terminalreporter.write_sep("-", f"the session's operator was started again {len(operator_harness.REVIVALS)}x")
        for line in operator_harness.REVIVALS[-5:]:
            terminalreporter.write_line(line)
    if failure_report.FIRST_FAILURE:
        terminalreporter.write_sep("-", "the session's operator at the first failed test")
        for line in failure_report.FIRST_FAILURE:
            terminalreporter.write_line(line)
