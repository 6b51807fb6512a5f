"""A second local cluster as a MultiKueue worker of the session's cluster (the manager): its own control plane,
kwok GPU nodes, Kueue, the TrainingJob CRD and an operator; and the manager's MultiKueue objects pointing at it.

Why a module of its own: the worker is a whole cluster with its own operator, started once for the tests that need
it and taken down afterwards (kept with TJ_KEEP_CLUSTER=true, like the session's).
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.conftest import TEST_CLUSTER_NAME, _truthy
from tests.kube import Kube, wait_until
from tests.kueue_support import GROUP, VERSION, Queues

WORKER_CLUSTER = f"{TEST_CLUSTER_NAME}-mkw"
WORKER_NODES = 2
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


@dataclass(frozen=True)
class Worker:
    kube: Kube
    kubeconfig: Path


def embedded_kubeconfig(path: Path) -> str:
    """The cluster's admin kubeconfig with its files inlined: MultiKueue refuses kubeconfigs that name files."""
    config = yaml.safe_load(path.read_text())
    for entry in config["clusters"]:
        cluster = entry["cluster"]
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    for entry in config["users"]:
        user = entry["user"]
        for key in ("client-certificate", "client-key"):
            user[f"{key}-data"] = base64.b64encode(Path(user.pop(key)).read_bytes()).decode()
    return yaml.safe_dump(config)


@pytest.fixture(scope="module")
def worker(kueue: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """The worker cluster, with Kueue and an operator of this checkout running against it (once the manager's Kueue
    runs)."""
    from tests.crd_support import apply_manifests, install_crd, service_account_kubeconfig
    from tests.operator_harness import REPO, start_operator
    from trainingjob.cluster import control_plane
    from trainingjob.cluster.kueue.run import ensure_running

    state = control_plane.up(WORKER_CLUSTER, nodes=WORKER_NODES, local_nodes=0, say=lambda _: None)
    ensure_running(state, say=lambda _: None)
    kube = Kube(state.kubeconfig)
    install_crd(kube)
    # MultiKueue watches the kind of every integration the manager's Kueue enables on each worker, and counts a
    # worker that does not serve one as not connected: Kubeflow's PyTorchJob (cluster/kueue/settings.FRAMEWORKS).
    from bench.kubeflow import module_dir

    crd = module_dir() / "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"
    kubectl = [state.binaries["kubectl"], f"--kubeconfig={state.kubeconfig}"]
    subprocess.run([*kubectl, "apply", "--server-side", "-f", str(crd)], check=True, capture_output=True, timeout=120)
    apply_manifests(state.binaries["kubectl"], state.kubeconfig, REPO / "deploy" / "rbac")
    directory = tmp_path_factory.mktemp("worker-operator")
    account = service_account_kubeconfig(kube, directory / "operator.kubeconfig")
    operator = start_operator(account, directory / "operator.log", cluster=WORKER_CLUSTER)
    yield Worker(kube, state.kubeconfig)
    operator.stop()
    print(f"worker operator log: {operator.log_path}")
    if not _truthy("TJ_KEEP_CLUSTER"):
        control_plane.down(WORKER_CLUSTER)


def create_ignoring_conflict(call: Any) -> None:
    try:
        call()
    except ApiException as error:
        if error.status != 409:
            raise


def multikueue_check(manager: Queues, worker: Worker) -> str:
    """The manager's AdmissionCheck that dispatches to the worker (its Secret, MultiKueueCluster and
    MultiKueueConfig), once MultiKueue has connected to the worker and made the check Active."""
    name = manager.name("worker")
    secret = {"metadata": {"name": name}, "stringData": {"kubeconfig": embedded_kubeconfig(worker.kubeconfig)}}
    create_ignoring_conflict(lambda: manager.kube.core.create_namespaced_secret("kueue-system", secret))
    source = {"kubeConfig": {"locationType": "Secret", "location": name}}
    manager.create("MultiKueueCluster", name, {"clusterSource": source})
    manager.create("MultiKueueConfig", name, {"clusters": [name]})
    parameters = {"apiGroup": GROUP, "kind": "MultiKueueConfig", "name": name}
    manager.create("AdmissionCheck", name, {"controllerName": MULTIKUEUE, "parameters": parameters})
    wait_until(lambda: active(manager.kube, "admissionchecks", name), 120, f"AdmissionCheck {name} to be Active")
    return name


def active(kube: Kube, plural: str, name: str) -> bool:
    body = kube.custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)


def delete_secret(kube: Kube, name: str) -> None:
    try:
        kube.core.delete_namespaced_secret(name, "kueue-system")
    except ApiException as error:
        if error.status != 404:
            raise


def grant_kueue_trainingjobs(kube: Kube) -> None:
    """The rights on TrainingJobs that `tj cluster up --with-kueue` gives Kueue (cluster/kueue/install.py), given to
    a Kueue installed before they were part of it too."""
    from trainingjob.cluster.kueue.install import trainingjob_access

    role, binding = trainingjob_access()
    create_ignoring_conflict(lambda: kube.rbac.create_cluster_role(role))
    create_ignoring_conflict(lambda: kube.rbac.create_cluster_role_binding(binding))
