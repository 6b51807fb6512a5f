"""Storage version migration, end to end: jobs stored as v1alpha1 (by a CRD whose storage version it was) stay so
after v1 becomes the storage version, until `tj migrate-storage` rewrites them; then the CRD records v1 alone.
What etcd holds is read from etcd itself, not inferred from the API."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.request

import pytest

from tests.conftest import TEST_CLUSTER_NAME, ClusterUnderTest
from tests.crd_support import install_crd
from tests.integration.v1_support import create, read, v1_job, wait_state
from tests.jobs import job_manifest
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from trainingjob.api import constants as c
from trainingjob.api.schema import crd_manifest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("trainingjob_crd")]


def stored_api_version(namespace: str, name: str) -> str:
    """The apiVersion of the object as etcd holds it (etcd's JSON gateway, with the API server's client cert)."""
    from trainingjob.cluster.control_plane import ClusterState

    state = ClusterState.load(TEST_CLUSTER_NAME)
    if state is None or os.environ.get("TJ_USE_EXISTING_CLUSTER"):
        pytest.skip("reads etcd of a local cluster started by the tests")
    pki = state.layout.pki
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "apiserver-etcd-client.crt", pki / "apiserver-etcd-client.key")
    key = f"/registry/{c.GROUP}/{c.PLURAL}/{namespace}/{name}".encode()
    request = urllib.request.Request(
        f"https://127.0.0.1:{state.ports['etcd']}/v3/kv/range",
        data=json.dumps({"key": base64.b64encode(key).decode()}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        (entry,) = json.load(answer)["kvs"]
    return json.loads(base64.b64decode(entry["value"]))["apiVersion"]


def stored_versions(kube: Kube) -> list[str]:
    return kube.extensions.read_custom_resource_definition(c.CRD_NAME).status.stored_versions


def migrate(cluster: ClusterUnderTest) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", "migrate-storage", "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def crd_storing(version: str) -> dict:
    manifest = crd_manifest()
    for served in manifest["spec"]["versions"]:
        served["storage"] = served["name"] == version
    return manifest


def test_jobs_stored_as_v1alpha1_are_migrated_to_v1(cluster: ClusterUnderTest, kube: Kube, namespace: str) -> None:
    jobs = {"lab": job_manifest("lab", complete_after=None), "guide": v1_job("guide")}
    install_crd(kube, crd_storing(c.V1ALPHA1))  # the CRD as it was before v1 was stored
    try:
        for manifest in jobs.values():
            create(kube, namespace, manifest)
        for name in jobs:
            wait_state(kube, namespace, name, "Running")
            assert stored_api_version(namespace, name) == f"{c.GROUP}/{c.V1ALPHA1}"
    finally:
        install_crd(kube)  # the CRD as shipped: v1 stored
    stored = stored_versions(kube)
    assert set(stored) == {c.V1ALPHA1, c.V1}
    before = {name: read(kube, namespace, name, c.V1) for name in jobs}
    assert {stored_api_version(namespace, name) for name in jobs} == {f"{c.GROUP}/{c.V1ALPHA1}"}, "still as written"

    output = migrate(cluster)
    assert "TrainingJob(s) in ml.example.com/v1" in output
    assert f"status.storedVersions: {stored} -> ['v1']" in output
    assert stored_versions(kube) == [c.V1]
    for name in jobs:
        assert stored_api_version(namespace, name) == f"{c.GROUP}/{c.V1}"
        after = read(kube, namespace, name, c.V1)
        assert (
            after["spec"] == before[name]["spec"]
            and after["metadata"]["generation"] == before[name]["metadata"]["generation"]
        )
        assert after["status"]["attempt"] == 0, "rewriting a job restarts nothing"
    again = migrate(cluster)
    assert "status.storedVersions: ['v1'] -> ['v1']" in again, "a second run finds nothing left to do"
    wait_until(lambda: read(kube, namespace, "lab", c.V1ALPHA1) is not None, 10, "v1alpha1 still served")
