"""Test-side access to the real API server (the official sync client) and polling helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Poll until `condition()` is truthy and return it; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Kube:
    """API groups the tests use, built from one kubeconfig."""

    def __init__(self, kubeconfig: Path, api_client: client.ApiClient | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.api = api_client or config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.extensions = client.ApiextensionsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def has_service_account(self, namespace: str, name: str) -> bool:
        try:
            self.core.read_namespaced_service_account(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    def pod_or_none(self, namespace: str, name: str) -> client.V1Pod | None:
        try:
            return self.core.read_namespaced_pod(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def pod_phase(self, namespace: str, name: str) -> str | None:
        pod = self.pod_or_none(namespace, name)
        return pod.status.phase if pod else None

    def with_token(self, token: str) -> Kube:
        """The same cluster, authenticated as whoever `token` belongs to (no client certificate)."""
        configuration = client.Configuration()
        base = self.api.configuration
        configuration.host = base.host
        configuration.ssl_ca_cert = base.ssl_ca_cert
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return Kube(self.kubeconfig, client.ApiClient(configuration))


def token_kubeconfig(
    kube: Kube, account: str, namespace: str, path: Path, *, seconds: int = 3600, context_namespace: str = ""
) -> Path:
    """Write to `path` a kubeconfig that authenticates as ServiceAccount `namespace/account` with a TokenRequest
    token valid `seconds` (no admin certificate), so whatever runs with it is refused what that account is not
    granted. `context_namespace`: the context's namespace (what `tj` and the UI default to), none when empty."""
    token = kube.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": seconds}}
    ).status.token
    base = kube.api.configuration
    context = {"cluster": "local", "user": account, **({"namespace": context_namespace} if context_namespace else {})}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": base.host, "certificate-authority": base.ssl_ca_cert}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": context}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(document))
    path.chmod(0o600)
    return path


def restricted_pod(name: str, annotations: dict[str, str] | None = None, **spec: object) -> dict:
    """A pod that PodSecurity `restricted` admits; kwok plays it on a fake node."""
    container = {
        "name": "main",
        "image": "registry.example/train:1",
        "command": ["python", "train.py"],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }
