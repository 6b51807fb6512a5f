"""Without Kueue, the operator lists each of Kueue's resources once (404: not served) and then waits on a watch of its
CRD by name (kube/crd_gate.py), instead of listing again with a backoff of up to 30 s; a CRD that appears is listed
at once. `make test` runs this file first, in a session of its own, before any Kueue test installs Kueue on a
cluster; skipped only where Kueue is installed anyway (an existing cluster, or a run of the whole suite by hand)."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException

from tests.control_plane_faults import api_requests
from tests.kube import Kube, wait_until
from tests.operator_harness import RunningOperator

pytestmark = pytest.mark.integration

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
PLURALS = ("workloads", "resourceflavors", "workloadpriorityclasses")
FLAVORS_CRD = f"resourceflavors.{GROUP}"
# A stand-in for Kueue's ResourceFlavor CRD (no Kueue runs): it is only listed and watched, never used.
STAND_IN = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": FLAVORS_CRD},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": "resourceflavors", "singular": "resourceflavor", "kind": "ResourceFlavor"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def reads(operator: RunningOperator, plural: str, code: str) -> float:
    return api_requests(operator).get(("get", plural, code), 0.0)


def gone(kube: Kube, name: str) -> bool:
    try:
        kube.extensions.read_custom_resource_definition(name)
    except ApiException as error:
        return error.status == 404
    return False


def test_kueues_resources_are_listed_once_and_a_crd_that_appears_is_listed_at_once(
    kube: Kube, operator: RunningOperator
) -> None:
    if not all(gone(kube, f"{plural}.{GROUP}") for plural in PLURALS):
        pytest.skip("Kueue is installed on this cluster")
    wait_until(lambda: all(reads(operator, p, "404") >= 1 for p in PLURALS), 30, "Kueue's resources to be listed")
    time.sleep(4)  # the old backoff (1 s, 2 s, …) listed each again twice within this
    assert {p: reads(operator, p, "404") for p in PLURALS} == dict.fromkeys(PLURALS, 1.0)

    kube.extensions.create_custom_resource_definition(STAND_IN)
    try:
        created = time.monotonic()
        wait_until(lambda: reads(operator, "resourceflavors", "200") >= 1, 30, "the new CRD's resource to be listed")
        print(f"ResourceFlavors listed {time.monotonic() - created:.2f}s after their CRD was created")
    finally:
        kube.extensions.delete_custom_resource_definition(FLAVORS_CRD)
        wait_until(lambda: gone(kube, FLAVORS_CRD), 60, "the stand-in CRD to be deleted")
