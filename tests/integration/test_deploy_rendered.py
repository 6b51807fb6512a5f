"""deploy/ as kustomize renders it, checked object by object without applying anything: the monitoring overlay
scrapes the metrics port and alerts when the operator is gone, the Deployment (base and both overlays) is hardened
and runs two spread replicas with arguments `tj operator` accepts, and the namespaced overlay binds no cluster-wide
role to the operator but TokenReview.

Only kubectl's kustomize is used, nothing is applied. What the API server makes of deploy/ is in
test_deploy_manifests.py (dry runs, the base running) and test_deploy_rbac_enforced.py (the shipped RBAC).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ClusterUnderTest
from tests.integration.deploy_support import (
    DEPLOY,
    OVERLAYS,
    PROMETHEUS_OPERATOR,
    WATCHED,
    group_kind,
    operator_subject,
    render,
)
from tests.operator_harness import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE
from trainingjob.cli.operator import operator as operator_command
from trainingjob.cli.operator import settings_from

pytestmark = pytest.mark.integration

RENDERED = {"base": DEPLOY, **OVERLAYS}


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return found


def test_the_monitoring_overlay_scrapes_the_metrics_port_and_alerts_when_the_operator_is_gone(
    cluster: ClusterUnderTest,
) -> None:
    docs = render(cluster, OVERLAYS["monitoring"])
    service, monitor, rule = one(docs, "Service"), one(docs, "ServiceMonitor"), one(docs, "PrometheusRule")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [OPERATOR_NAMESPACE]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert endpoint["port"] == "metrics" and ports == {"metrics": 9090, "progress": 8443, "webhook": 443}
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True  # the metrics' own namespace/job labels win (tests/unit/test_monitoring.py)
    alerts = {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r}
    # The Prometheus Operator names the scrape job after the Service, which is what the Down alert selects.
    assert f'job="{service["metadata"]["name"]}"' in alerts["TrainingJobOperatorDown"]["expr"]
    assert {
        "TrainingJobFailed",
        "TrainingJobStuckPending",
        "TrainingJobRestartRateHigh",
        "TrainingJobReconcileErrors",
    } <= set(alerts)
    dashboard = one(docs, "ConfigMap", "trainingjob-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    # Everything but the monitoring objects is the base, unchanged.
    base = render(cluster, DEPLOY)
    assert [d for d in docs if group_kind(d) not in PROMETHEUS_OPERATOR and d is not dashboard] == base


@pytest.mark.parametrize("variant", sorted(RENDERED))
def test_the_rendered_deployment_is_hardened_and_highly_available(cluster: ClusterUnderTest, variant: str) -> None:
    deployment = one(render(cluster, RENDERED[variant]), "Deployment", "trainingjob-operator")
    assert deployment["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == OPERATOR_ACCOUNT and pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/example/trainingjob-operator:0.1.0"
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 65532
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in one_volume(pod, tmp["name"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9090, "progress": 8443, "webhook": 9443}
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    (preferred,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]

    # `tj operator` accepts exactly these arguments, and they serve the ports the probes and the Service use.
    assert container["command"] == ["tj"] and container["args"][0] == "operator"
    settings = settings_from(operator_command.make_context("operator", list(container["args"][1:])).params)
    assert settings.liveness_endpoint == "http://0.0.0.0:8080/healthz"
    assert (settings.metrics_port, settings.progress_port, settings.log_format) == (9090, 8443, "json")
    assert settings.webhooks.port == 9443 and settings.webhooks.url is None  # in the cluster: the Service
    assert settings.leader_elect is True
    if variant == "namespaced":
        assert settings.namespaces == (WATCHED,) and not settings.all_namespaces
    else:
        assert settings.all_namespaces and settings.namespaces == ()


def one_volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    (volume,) = [v for v in pod["volumes"] if v["name"] == name]
    return volume


def test_the_namespaced_overlay_binds_no_cluster_wide_role_to_the_operator(cluster: ClusterUnderTest) -> None:
    docs = render(cluster, OVERLAYS["namespaced"])
    cluster_roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    # trainingjob-host-access is for admins to grant users (deploy/rbac/host-access.yaml), bound to nobody here.
    assert cluster_roles.pop("trainingjob-host-access")
    assert sorted(cluster_roles) == [
        "trainingjob-operator-kueue",
        "trainingjob-operator-nodes",
        "trainingjob-operator-runtimes",
        "trainingjob-operator-tokenreview",
        "trainingjob-operator-webhooks",
    ]
    # Token and access reviews: the progress endpoint's callers, the admission check of a job's author.
    assert cluster_roles["trainingjob-operator-tokenreview"]["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]
    # Cluster-scoped kinds only, read-only: Kueue's flavors and priority classes, the cluster's runtimes, and
    # Kueue's three CRDs by name (watched while Kueue is absent, kube/crd_gate.py).
    assert cluster_roles["trainingjob-operator-kueue"]["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["resourceflavors", "workloadpriorityclasses"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": [
                "workloads.kueue.x-k8s.io",
                "resourceflavors.kueue.x-k8s.io",
                "workloadpriorityclasses.kueue.x-k8s.io",
            ],
            "verbs": ["list", "watch"],
        },
    ]
    assert cluster_roles["trainingjob-operator-runtimes"]["rules"] == [
        {"apiGroups": ["ml.example.com"], "resources": ["clustertrainingruntimes"], "verbs": ["get", "list", "watch"]}
    ]
    assert cluster_roles["trainingjob-operator-nodes"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    ], "reading single nodes (stuck pods on lost nodes) stays cluster-wide"
    # The webhooks' cluster-scoped objects, each by name, and PriorityClasses (read-only): nothing in a namespace.
    for rule in cluster_roles["trainingjob-operator-webhooks"]["rules"]:
        assert rule.get("resourceNames") or rule["resources"] == ["priorityclasses"]
        assert set(rule["verbs"]) <= {"get", "list", "watch", "patch"}  # watched by name (webhooks/upkeep.py)
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding" and operator_subject(d)]
    assert sorted(b["roleRef"]["name"] for b in bindings) == sorted(cluster_roles)
    role, binding = one(docs, "Role", "trainingjob-operator"), one(docs, "RoleBinding", "trainingjob-operator")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == WATCHED
    assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) == ("Role", "trainingjob-operator")
    assert operator_subject(binding)
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args and args[args.index("--namespace") + 1] == WATCHED


@pytest.mark.parametrize("variant", sorted(RENDERED))
def test_the_cluster_install_registers_the_webhooks_behind_the_service(cluster: ClusterUnderTest, variant: str) -> None:
    """deploy/crd/ points at 127.0.0.1 for `tj operator` outside the cluster; the cluster install patches all three
    to the operator's Service, exactly as the operator itself would point them (webhook_config.service_endpoint)."""
    from trainingjob.api import webhook_config as w

    docs = render(cluster, RENDERED[variant])
    service = w.service_endpoint(OPERATOR_NAMESPACE)
    crd = one(docs, "CustomResourceDefinition", "trainingjobs.ml.example.com")
    assert crd["spec"]["conversion"] == w.conversion(service)
    assert "conversion" not in one(docs, "CustomResourceDefinition", "llmmodels.ai.example.com")["spec"]
    for kind, path, failure in (
        ("MutatingWebhookConfiguration", w.MUTATE_PATH, "Fail"),  # it stamps what it admits: never skipped
        ("ValidatingWebhookConfiguration", w.VALIDATE_PATH, "Ignore"),
    ):
        (webhook,) = one(docs, kind, w.CONFIGURATION_NAME)["webhooks"]
        assert webhook["clientConfig"] == service.client_config(path)
        assert webhook["failurePolicy"] == failure
    ports = {
        p["name"]: (p["port"], p["targetPort"]) for p in one(docs, "Service", "trainingjob-operator")["spec"]["ports"]
    }
    assert ports["webhook"] == (w.SERVICE_PORT, "webhook")
