"""deploy/rbac grants exactly the API calls the operator's code makes (tests/rbac_usage.py reads them from the source):
a verb nobody calls fails here, and so does a call the manifests do not allow. The namespaced overlay's Role stays the
ClusterRole's namespaced rules.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rbac_usage import CLUSTER_SCOPED, REPO, Grant, expand, used_by_code
from trainingjob.api import constants

RBAC = REPO / "deploy" / "rbac"
NAMESPACED_OVERLAY = REPO / "deploy" / "overlays" / "namespaced"
ACCOUNT = ("trainingjob-system", "trainingjob-operator")


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def granted(docs: list[dict[str, Any]]) -> set[Grant]:
    """What the bindings in `docs` give the operator's ServiceAccount (rules with resourceNames count in full)."""
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    result: set[Grant] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any((s.get("namespace"), s["name"]) == ACCOUNT for s in binding["subjects"]):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        result |= expand(role["rules"])
    return result


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(RBAC.glob("*.yaml")) for doc in documents(path)]


def cluster_role() -> dict[str, Any]:
    return documents(RBAC / "cluster-role.yaml")[0]


def unused(grants: set[Grant]) -> set[Grant]:
    return grants - used_by_code()


def test_the_scanner_finds_the_operators_calls() -> None:
    used = used_by_code()
    expected = {
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "pods", "watch"),
        ("", "configmaps", "update"),
        ("", "events", "create"),
        (constants.GROUP, constants.PLURAL, "patch"),
        (constants.GROUP, constants.PLURAL, "delete"),
        (constants.GROUP, f"{constants.PLURAL}/status", "patch"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "secrets", "get"),
    }
    assert expected <= used, expected - used


def test_every_verb_the_cluster_role_grants_is_used_by_the_code() -> None:
    extra = unused(expand(cluster_role()["rules"]))
    assert not extra, f"deploy/rbac/cluster-role.yaml grants what no code uses: {sorted(extra)}"


def test_the_rbac_the_operator_gets_is_exactly_what_the_code_uses() -> None:
    grants, used = granted(rbac_documents()), used_by_code()
    assert not grants - used, f"granted but never used: {sorted(grants - used)}"
    assert not used - grants, f"used but not granted by deploy/rbac: {sorted(used - grants)}"


def test_a_verb_added_to_the_cluster_role_is_caught() -> None:
    rules = copy.deepcopy(cluster_role()["rules"])
    next(r for r in rules if r["resources"] == ["pods"])["verbs"].append("patch")
    rules.append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["delete"]})
    assert unused(expand(rules)) == {("", "pods", "patch"), ("", "secrets", "delete")}


def test_no_wildcards_and_secrets_only_by_name_in_the_operators_namespace() -> None:
    """Secrets are read only by name in the operator's own namespace; across namespaces the operator may only create
    them (an MPI job's key, frameworks/mpi.py), never read, list or watch one."""
    for doc in rbac_documents():
        for rule in doc.get("rules", []):
            assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], doc["metadata"]["name"]
    cluster_wide = {verb for _, resource, verb in expand(cluster_role()["rules"]) if resource == "secrets"}
    assert cluster_wide == {"create"}
    tls_role = next(d for d in documents(RBAC / "progress-tls.yaml") if d["kind"] == "Role")
    assert tls_role["metadata"]["namespace"] == ACCOUNT[0]
    reads = [r for r in tls_role["rules"] if "get" in r["verbs"]]
    assert reads and all(r.get("resourceNames") == ["trainingjob-progress-tls"] for r in reads)
    webhook_role = next(d for d in documents(RBAC / "webhooks.yaml") if d["kind"] == "Role")
    watches = [r for r in webhook_role["rules"] if {"get", "list", "watch"} & set(r["verbs"])]
    assert watches and all(r.get("resourceNames") == ["trainingjob-webhook-tls"] for r in watches)


def overlay_documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(NAMESPACED_OVERLAY.glob("*.yaml")) for doc in documents(path)]


def test_the_namespaced_role_is_the_cluster_roles_namespaced_rules() -> None:
    roles = [d for d in overlay_documents() if d["kind"] == "Role"]
    assert roles, "deploy/overlays/namespaced has no per-namespace Role"
    namespaced = {g for g in expand(cluster_role()["rules"]) if g[:2] not in CLUSTER_SCOPED}
    for role in roles:
        assert expand(role["rules"]) == namespaced, role["metadata"]["namespace"]


# The only cluster-wide rights of the namespaced overlay: Token- and SubjectAccessReview (cluster-scoped APIs),
# reading a node, reading ClusterTrainingRuntimes, and reading Kueue's ResourceFlavors and WorkloadPriorityClasses
# (cluster-scoped).
OVERLAY_CLUSTER_ROLES = {
    "trainingjob-operator-nodes": {("", "nodes", "get")},
    "trainingjob-operator-runtimes": {
        ("ml.example.com", "clustertrainingruntimes", verb) for verb in ("get", "list", "watch")
    },
    "trainingjob-operator-tokenreview": {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    },
    "trainingjob-operator-kueue": {
        ("kueue.x-k8s.io", resource, verb)
        for resource in ("resourceflavors", "workloadpriorityclasses")
        for verb in ("get", "list", "watch")
    }
    | {("apiextensions.k8s.io", "customresourcedefinitions", verb) for verb in ("list", "watch")},
}


@pytest.mark.parametrize("kind", ["ClusterRole", "ClusterRoleBinding"])
def test_the_namespaced_overlay_keeps_only_tokenreview_node_runtime_and_kueue_reads_cluster_wide(kind: str) -> None:
    cluster_scoped = {d["metadata"]["name"]: d for d in overlay_documents() if d["kind"] == kind}
    assert sorted(cluster_scoped) == sorted(OVERLAY_CLUSTER_ROLES)
    for name, doc in cluster_scoped.items():
        if kind == "ClusterRole":
            assert expand(doc["rules"]) == OVERLAY_CLUSTER_ROLES[name]
        else:
            assert doc["roleRef"]["name"] == name


def test_the_cluster_role_is_the_overlays_rules_together() -> None:
    """Nothing the cluster-wide deployment may do is missing from the namespaced one (or the reverse)."""
    role = next(d for d in overlay_documents() if d["kind"] == "Role")
    together = expand(role["rules"]).union(*OVERLAY_CLUSTER_ROLES.values())
    assert together == expand(cluster_role()["rules"])
