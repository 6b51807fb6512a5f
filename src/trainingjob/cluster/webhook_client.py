"""The local API server presents a client certificate to admission webhooks, so the operator can tell it from any
pod that reaches its webhook port (webhooks/client_auth.py, issue 41).

kube-apiserver reads, per admission plugin, a kubeconfig whose `users` are matched against the webhook's host
(`*` matches every host): the ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins get one here with the
certificate `apiserver-webhook-client` (CN kube-apiserver-webhook-client, signed by the cluster CA). Conversion
webhooks get no client certificate from kube-apiserver whatever is configured (see webhooks/client_auth.py).
Pure documents; control_plane.py writes them when it creates a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainingjob.cluster.components import Layout
from trainingjob.cluster.pki import WEBHOOK_CLIENT_NAME, WEBHOOK_CLIENT_STEM

ADMISSION_FILE = "admission.yaml"
KUBECONFIG_FILE = "webhook-client.kubeconfig"
PLUGINS = ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")


def webhook_kubeconfig(pki: Path) -> dict[str, Any]:
    """The credentials the API server presents to every admission webhook it calls."""
    user = {
        "client-certificate": str(pki / f"{WEBHOOK_CLIENT_STEM}.crt"),
        "client-key": str(pki / f"{WEBHOOK_CLIENT_STEM}.key"),
    }
    return {"apiVersion": "v1", "kind": "Config", "users": [{"name": "*", "user": user}]}


def admission_configuration(kubeconfig: Path) -> dict[str, Any]:
    """kube-apiserver's --admission-control-config-file: both webhook plugins use `kubeconfig`."""
    webhook = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig),
    }
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{"name": plugin, "configuration": webhook} for plugin in PLUGINS],
    }


def operator_flags(layout: Layout) -> tuple[str, ...]:
    """`tj operator` flags that let only this cluster's API server call the admission webhooks; none for a cluster
    created before its API server had a webhook client certificate."""
    if not (layout.root / ADMISSION_FILE).exists():
        return ()
    return ("--webhook-client-ca", str(layout.pki / "ca.crt"), "--webhook-client-name", WEBHOOK_CLIENT_NAME)
