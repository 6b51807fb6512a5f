"""Kubeflow training-operator, built from its Go module like the control plane and installed from its own manifests.

Nothing of Kubeflow is committed: tools/kubeflow/go.mod pins the version; the binary is built into the same
per-version cache as the control plane, and the PyTorchJob CRD and ClusterRole are read from the module's source
in the Go module cache. Its validating webhook is left off (the API server could only reach it through a Service
name its certificate is issued for); the controller applies the same defaults itself.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from trainingjob.cluster import build
from trainingjob.cluster.build import ComponentSet, build_component_set

if TYPE_CHECKING:
    from bench.cluster import BenchCluster

MODULE = "github.com/kubeflow/training-operator"
KUBEFLOW = ComponentSet("kubeflow", MODULE, {"training-operator": f"{MODULE}/cmd/training-operator.v1"})
NAMESPACE = "kubeflow"
ACCOUNT = "training-operator"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
WEBHOOK_SECRET = "training-operator-webhook-cert"
# Hard-coded in the training-operator (pkg/cert); in a pod the Secret is mounted there.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
# "Best configuration": no effective client-side rate limit (our operator has none) and 16 reconcile workers
# (our --max-concurrent-reconciles). The defaults are --kube-api-qps=20 --kube-api-burst=30 --controller-threads=1.
TUNED_FLAGS = ["--kube-api-qps=2000", "--kube-api-burst=4000", "--controller-threads=16"]


# What Kubeflow puts in a PyTorch container itself: an extra of the same name would clash with it.
OWN_ENV = {"PYTHONUNBUFFERED", "MASTER_PORT", "MASTER_ADDR", "WORLD_SIZE", "RANK"}


@dataclass(frozen=True)
class PodExtras:
    """Fields a PyTorchJob's pod template adds: `container` to its one container, `pod` to the pod spec."""

    container: dict[str, Any]
    pod: dict[str, Any]


def extras_like(pod: dict[str, Any]) -> PodExtras:
    """The part of one of our worker pods that Kubeflow's pods lack (the env of our contract without the names
    Kubeflow sets, our volumes and mounts, the restricted security context), so that a PyTorchJob's pods carry
    as many bytes per watch event as ours: the experiment BENCH_KUBEFLOW_POD=ours."""
    container = pod["spec"]["containers"][0]
    env = [e for e in container["env"] if e["name"] not in OWN_ENV and not e["name"].startswith("PET_")]
    keep = {"env": env, **{key: container[key] for key in ("volumeMounts", "securityContext") if key in container}}
    spec = {key: pod["spec"][key] for key in ("volumes", "securityContext", "enableServiceLinks") if key in pod["spec"]}
    return PodExtras(container=keep, pod=spec)


def binary() -> Path:
    return build_component_set(KUBEFLOW) / "training-operator"


def module_dir() -> Path:
    """The module's source as the Go module cache holds it (downloaded by the build)."""
    return build.module_dir(KUBEFLOW)


def control_objects() -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, its ClusterRole (upstream's) and binding, and the webhook plumbing it insists on."""
    role = yaml.safe_load((module_dir() / "manifests/base/rbac/role.yaml").read_text())
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}},
        role,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        },
        # The cert rotator fills this Secret and patches the (here empty) webhook configuration before it
        # lets the controllers start.
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE}},
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION},
            "webhooks": [],
        },
    ]


def install(cluster: BenchCluster) -> Path:
    """Build (first use), then install the CRD and RBAC; returns the binary."""
    built = binary()
    crd = module_dir() / "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"
    # Server-side apply: the CRD is too large for kubectl's last-applied annotation.
    cluster.kubectl("apply", "--server-side", "-f", str(crd))
    cluster.wait_established("pytorchjobs.kubeflow.org")
    documents = "\n---\n".join(yaml.safe_dump(o) for o in control_objects())
    cluster.kubectl("apply", "-f", "-", input_text=documents)
    return built


def clear_serving_certs() -> None:
    shutil.rmtree(CERT_DIR, ignore_errors=True)


def mount_serving_certs(cluster: BenchCluster) -> None:
    """Play the kubelet's secret volume: its cert rotator fills the Secret, then waits for the files in CERT_DIR."""
    if (CERT_DIR / "tls.crt").exists():
        return
    secret = json.loads(cluster.kubectl("get", "secret", WEBHOOK_SECRET, "-n", NAMESPACE, "-o", "json"))
    data = secret.get("data") or {}
    if not all(key in data for key in ("tls.crt", "tls.key", "ca.crt")):
        return
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "tls.key", "tls.crt"):  # tls.crt last: its presence is what the operator waits for
        (CERT_DIR / key).write_bytes(base64.b64decode(data[key]))


def pytorch_job(
    name: str,
    workers: int,
    image: str,
    command: list[str],
    annotations: dict[str, str],
    pod_extras: PodExtras | None = None,
) -> dict[str, Any]:
    """1 Master + W-1 Workers: W pods, like one TrainingJob of W workers. `pod_extras` (an experiment): what the
    template adds to the container and to the pod spec beside Kubeflow's own."""

    def replica(count: int) -> dict[str, Any]:
        container = {"name": "pytorch", "image": image, "command": command}
        spec: dict[str, Any] = {"containers": [container]}
        if pod_extras is not None:
            container.update(copy.deepcopy(pod_extras.container))
            spec.update(copy.deepcopy(pod_extras.pod))
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"metadata": {"annotations": dict(annotations)}, "spec": spec},
        }

    replicas = {"Master": replica(1)}
    if workers > 1:
        replicas["Worker"] = replica(workers - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
