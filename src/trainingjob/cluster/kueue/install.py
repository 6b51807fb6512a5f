"""What of Kueue's own install manifests a local cluster applies, and how each is pointed at the Kueue process.

The manifests are Kueue's release assembly of its config/ (rendered at build time, build.py). Kept: the namespace,
CRDs, RBAC, webhook configurations, the visibility APIService and its Service. Left out: the Deployment (Kueue runs
as a process), the Services of its webhooks and metrics (the API server dials the process's URL instead), its config
map (settings.py writes ours) and the Secret its internal certificate manager would fill (our CA signs instead).
Pointed at the process:
- webhooks and CRD conversion: `url: https://127.0.0.1:<port><path>` with our CA, as our operator's webhooks are;
- the visibility APIService: its Service becomes an ExternalName for localhost (the aggregator dials
  `<externalName>:<APIService port>` and checks the certificate against `<service>.<namespace>.svc`), with our CA
  instead of upstream's insecureSkipTLSVerify.
Only webhooks of Kueue's own kinds and of the integrations we enable are registered: with failurePolicy Fail, a
registered webhook of a kind Kueue does not manage would refuse every pod or Job while Kueue is down.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from trainingjob.api import constants as c
from trainingjob.cluster.kueue.settings import FRAMEWORKS, NAMESPACE, SERVICE_ACCOUNT, VISIBILITY_SERVICE

KUEUE_GROUP = "kueue.x-k8s.io"
KEPT_KINDS = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def framework_resource(framework: str) -> tuple[str, str]:
    """Kueue's integration name -> (API group, resource): `kubeflow.org/pytorchjob` -> (kubeflow.org, pytorchjobs),
    `pod` -> ("", pods)."""
    group, _, kind = framework.rpartition("/")
    return group, f"{kind}s"


def url_client_config(config: dict[str, Any], base_url: str, ca_bundle: str) -> dict[str, Any]:
    """A Service-addressed clientConfig re-addressed at `base_url`, keeping the Service's path."""
    path = (config.get("service") or {}).get("path") or ""
    return {"url": base_url.rstrip("/") + path, "caBundle": ca_bundle}


def webhook_is_needed(webhook: dict[str, Any], frameworks: Iterable[str]) -> bool:
    wanted = {framework_resource(f) for f in frameworks}
    for rule in webhook.get("rules") or []:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        if KUEUE_GROUP in groups or any(g in groups and r in resources for g, r in wanted):
            return True
    return False


def webhook_configuration(
    document: dict[str, Any], base_url: str, ca_bundle: str, frameworks: Iterable[str]
) -> dict[str, Any]:
    frameworks = tuple(frameworks)
    result = copy.deepcopy(document)
    result["webhooks"] = [
        {**webhook, "clientConfig": url_client_config(webhook["clientConfig"], base_url, ca_bundle)}
        for webhook in result.get("webhooks") or []
        if webhook_is_needed(webhook, frameworks)
    ]
    return result


def custom_resource_definition(document: dict[str, Any], base_url: str, ca_bundle: str) -> dict[str, Any]:
    result = copy.deepcopy(document)
    conversion = result["spec"].get("conversion") or {}
    if conversion.get("strategy") == "Webhook":
        webhook = conversion["webhook"]
        webhook["clientConfig"] = url_client_config(webhook["clientConfig"], base_url, ca_bundle)
    return result


def visibility_service(document: dict[str, Any]) -> dict[str, Any]:
    """The aggregator's way to the process: an ExternalName Service for localhost (no endpoints are needed)."""
    metadata = {
        key: document["metadata"][key] for key in ("name", "namespace", "labels") if key in document["metadata"]
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }


def api_service(document: dict[str, Any], visibility_port: int, ca_bundle: str) -> dict[str, Any]:
    result = copy.deepcopy(document)
    spec = result["spec"]
    spec.pop("insecureSkipTLSVerify", None)
    spec["caBundle"] = ca_bundle
    spec["service"] = {**spec["service"], "port": visibility_port}
    return result


def install_objects(
    documents: Iterable[dict[str, Any]],
    webhook_url: str,
    visibility_port: int,
    ca_bundle: str,
    frameworks: Iterable[str] = FRAMEWORKS,
) -> list[dict[str, Any]]:
    """The objects to apply, in an order the API server accepts: namespace and CRDs first, webhooks last."""
    frameworks = tuple(frameworks)
    objects = []
    for document in documents:
        kind = (document or {}).get("kind")
        if kind not in KEPT_KINDS:
            continue
        if kind == "Service":
            if document["metadata"]["name"] == VISIBILITY_SERVICE:
                objects.append(visibility_service(document))
        elif kind == "CustomResourceDefinition":
            objects.append(custom_resource_definition(document, webhook_url, ca_bundle))
        elif kind == "APIService":
            objects.append(api_service(document, visibility_port, ca_bundle))
        elif kind in WEBHOOK_KINDS:
            objects.append(webhook_configuration(document, webhook_url, ca_bundle, frameworks))
        else:
            objects.append(copy.deepcopy(document))
    objects += trainingjob_access()
    return sorted(objects, key=lambda o: KEPT_KINDS.index(o["kind"]))


def trainingjob_access() -> list[dict[str, Any]]:
    """Kueue's rights on TrainingJobs, which its own manifests cannot grant (it does not know the kind): MultiKueue's
    adapter for custom jobs reads a dispatched job on the manager cluster and copies the worker's status onto it."""
    name = "kueue-trainingjobs"
    rules = [
        {"apiGroups": [c.GROUP], "resources": [c.PLURAL], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [c.GROUP], "resources": [f"{c.PLURAL}/status"], "verbs": ["get", "patch", "update"]},
    ]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
    }
    return [{**role, "rules": rules}, binding]
