"""Which Kubernetes API calls the operator's code makes, as RBAC (apiGroup, resource, verb) triples, read from
the source with `ast`: kubernetes_asyncio methods (`create_namespaced_pod` → pods create,
`replace_namespaced_config_map` → configmaps update, `patch_namespaced_custom_object_status` → trainingjobs/status
patch, …), the writer's writes of the operator's own kinds (`writer.patch_status(TRAININGJOBS, …)` → trainingjobs/status
patch), plus get, list and watch on every resource the controllers register to watch (operator/*/watches.py).
deploy/rbac is checked against it (tests/unit/test_deploy_rbac.py, tests/integration/test_deploy_rbac_enforced.py).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

from trainingjob.api import constants
from trainingjob.scheduling.gang import PROVIDERS

REPO = Path(__file__).resolve().parents[1]
# Everything `tj operator` runs that talks to the API server (reconcile/ and builders/ are pure).
OPERATOR_CODE = [
    path
    for package in ("operator", "progress", "webhooks")
    for path in sorted((REPO / "src" / "trainingjob" / package).rglob("*.py"))
]
Grant = tuple[str, str, str]  # (apiGroup, resource, verb)

# kubernetes_asyncio method verb → RBAC verb.
VERBS = {"create": "create", "read": "get", "list": "list", "patch": "patch", "replace": "update", "delete": "delete"}
# Method kind → (apiGroup, resource, namespaced); custom_object is resolved from the call's group and plural.
KINDS = {
    "pod": ("", "pods", True),
    "service": ("", "services", True),
    "endpoint_slice": ("discovery.k8s.io", "endpointslices", True),
    "deployment": ("apps", "deployments", True),
    "horizontal_pod_autoscaler": ("autoscaling", "horizontalpodautoscalers", True),
    "config_map": ("", "configmaps", True),
    "persistent_volume_claim": ("", "persistentvolumeclaims", True),
    "event": ("", "events", True),
    "secret": ("", "secrets", True),
    "lease": ("coordination.k8s.io", "leases", True),
    "token_review": ("authentication.k8s.io", "tokenreviews", False),
    "subject_access_review": ("authorization.k8s.io", "subjectaccessreviews", False),
    # A Namespace is cluster-scoped, but a Role in namespace X can grant `get` on X itself (the API server
    # authorizes GET /api/v1/namespaces/X as a request in namespace X): per-namespace Roles carry it.
    "namespace": ("", "namespaces", True),
    "node": ("", "nodes", False),
    "service_account": ("", "serviceaccounts", True),
    "resource_quota": ("", "resourcequotas", True),
    "limit_range": ("", "limitranges", True),
    "priority_class": ("scheduling.k8s.io", "priorityclasses", False),
    "custom_resource_definition": ("apiextensions.k8s.io", "customresourcedefinitions", False),
    "mutating_webhook_configuration": ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", False),
    "validating_webhook_configuration": ("admissionregistration.k8s.io", "validatingwebhookconfigurations", False),
}
CLUSTER_SCOPED = {(group, resource) for group, resource, namespaced in KINDS.values() if not namespaced} | {
    (constants.GROUP, constants.CLUSTER_RUNTIME_PLURAL),
    ("kueue.x-k8s.io", "resourceflavors"),
    ("kueue.x-k8s.io", "workloadpriorityclasses"),
}
METHOD = re.compile(
    r"^(?P<verb>create|read|list|patch|replace|delete)_(?P<namespaced>namespaced_)?(?P<kind>[a-z_]+?)"
    r"(?P<status>_status)?(?:_for_all_namespaces)?$"
)
WATCH_VERBS = ("get", "list", "watch")
# The writer's methods for the operator's own kinds (operator/runtime/writer.py), whose first argument names the
# resource: (RBAC verb, subresource).
OWN_KIND_WRITES = {
    "patch_status": ("patch", "/status"),
    "patch_metadata": ("patch", ""),
    "delete_object": ("delete", ""),
    "create_object": ("create", ""),
    "patch_object": ("patch", ""),
}


def _constant(node: ast.expr) -> str:
    """A literal string, or `k.NAME` / `constants.NAME` from trainingjob.api.constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("k", "constants"):
        return getattr(constants, node.attr)
    raise AssertionError(f"cannot resolve {ast.unparse(node)} to a string")


def _calls_in(path: Path) -> set[Grant]:
    tree = ast.parse(path.read_text(), str(path))
    calls: dict[int, ast.Call] = {id(node.func): node for node in ast.walk(tree) if isinstance(node, ast.Call)}
    # unread(method, *args) (operator/runtime/calls.py): the method's arguments follow it.
    unread_args = {
        id(node.args[0]): node.args[1:]
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) == "unread"
    }
    used: set[Grant] = _own_kind_writes(path, tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            match = METHOD.match(node.attr)
            # self.delete_job(…) is ours; API methods hang off an API object (self.core, core, AuthenticationV1Api()).
            if not match or (isinstance(node.value, ast.Name) and node.value.id == "self"):
                continue
            verb, kind = VERBS[match["verb"]], match["kind"]
            if kind == "custom_object":
                call = calls.get(id(node))
                args = call.args if call is not None else unread_args.get(id(node))
                assert args is not None, f"{path.name}: {node.attr} passed around; cannot tell its resource"
                if ast.unparse(args[0]) == "group":
                    continue  # a gang object's API is data (see gang_object_grants)
                # (group, version, [namespace,] plural, …)
                group, plural = _constant(args[0]), _constant(args[3 if match["namespaced"] else 2])
            elif kind in KINDS:
                group, plural, _ = KINDS[kind]
            else:
                # Every *_namespaced_* method is a Kubernetes call; other names (asyncio.create_task) are not.
                assert not match["namespaced"], f"{path.name}: API call {node.attr}: add its kind to KINDS"
                continue
            used.add((group, plural + ("/status" if match["status"] else ""), verb))
    return used


def _own_kind_writes(path: Path, tree: ast.AST) -> set[Grant]:
    """`writer.patch_status(TRAININGJOBS, …)` and the like: the resource is the module's own (or imported) name."""
    module = ".".join(path.relative_to(REPO / "src").with_suffix("").parts)
    used: set[Grant] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        if node.func.attr in OWN_KIND_WRITES and isinstance(node.args[0], ast.Name):
            resource = getattr(importlib.import_module(module), node.args[0].id)
            verb, subresource = OWN_KIND_WRITES[node.func.attr]
            if any(k.arg == "status" and ast.unparse(k.value) == "True" for k in node.keywords):
                subresource = "/status"
            used.add((resource.group, resource.plural + subresource, verb))
    return used


def gang_object_grants() -> set[Grant]:
    """Gang objects (scheduling/gang.py): each served API is watched (registered in a loop, not by decorators) and
    its objects created and deleted through calls whose group and plural are data."""
    return {(p.api.group, p.api.plural, verb) for p in PROVIDERS for verb in (*WATCH_VERBS, "create", "delete")}


def watch_grants() -> set[Grant]:
    """Every resource the controllers register to watch (operator/*/watches.py), and the objects the webhooks'
    upkeep watches (webhooks/upkeep.py): get, list and watch."""
    from trainingjob.operator.kueue.watches import REGISTRATION as KUEUE
    from trainingjob.operator.llmmodel.watches import REGISTRATION as MODELS
    from trainingjob.operator.runtime.manager import all_watches
    from trainingjob.operator.trainingjob.watches import registration
    from trainingjob.operator.trainingsweep.watches import REGISTRATION as SWEEPS
    from trainingjob.webhooks.upkeep import WATCHED as WEBHOOK_OBJECTS  # by name (deploy/rbac/webhooks.yaml)

    watches = all_watches([registration(kueue=True), MODELS, SWEEPS, KUEUE])
    resources = [w.resource for w in watches]
    # A gated watch waits on a watch of its resource's CRD, by name (kube/crd_gate.py).
    gates = {("apiextensions.k8s.io", "customresourcedefinitions", verb) for w in watches if w.gated
             for verb in ("list", "watch")}  # fmt: skip
    return gates | {(r.group, r.plural, verb) for r in [*resources, *WEBHOOK_OBJECTS] for verb in WATCH_VERBS}


def used_by_code() -> set[Grant]:
    return set().union(*(_calls_in(path) for path in OPERATOR_CODE)) | watch_grants() | gang_object_grants()


def expand(rules: list[dict[str, Any]]) -> set[Grant]:
    """RBAC rules as the (apiGroup, resource, verb) triples they allow."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
