"""Kueue's configuration, command line, certificates and health check, as pure functions of the cluster layout.

Why it runs as a process and not as a pod: the control plane runs as processes, and a pod of a local process node
would tie Kueue to that node's resources and network. Kueue is built to run as a pod, though, and two things of its
pod are reproduced here:
- With `internalCertManagement` off (its certificates come from our CA, so the API server verifies them against the
  address it dials, 127.0.0.1), Kueue reads two certificates from fixed paths, /visibility and
  /etc/kueue/metrics/certs, where its Deployment mounts Secrets. Several clusters run side by side on one machine,
  so each Kueue gets a private mount namespace with its own cluster's directories bound there (needs root; the
  two paths exist on the machine only as empty mount points).
- Its identity is its ServiceAccount's (a client certificate for system:serviceaccount:kueue-system:
  kueue-controller-manager), so the RBAC of Kueue's own manifests applies unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainingjob.cluster.components import HealthCheck
from trainingjob.cluster.pki import CertSpec

NAMESPACE = "kueue-system"
SERVICE_ACCOUNT = "kueue-controller-manager"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
VISIBILITY_SERVICE = "kueue-visibility-server"
WEBHOOK_SERVICE = "kueue-webhook-service"
SERVING_CERT = "kueue-serving"
CLIENT_CERT = "kueue"
PORTS = ("kueue-webhook", "kueue-visibility", "kueue-health", "kueue-metrics")
# Where Kueue reads certificates it cannot be told another path for (cmd/kueue/main.go, pkg/visibility/server.go).
FIXED_CERT_PATHS = {"visibility": Path("/visibility"), "metrics": Path("/etc/kueue/metrics/certs")}
# Kueue's built-in integrations we enable: Kubeflow's PyTorchJob, the peer of bench/'s Kueue scenario. Each one adds
# a webhook the API server calls for that kind; pods, Deployments and batch Jobs are left alone.
FRAMEWORKS = ("kubeflow.org/pytorchjob",)
# TrainingJobs are a Kueue workload through the external-controller pattern (our operator creates the Workload);
# these tell Kueue the kind exists, for ownership lookups and for MultiKueue's generic adapter.
EXTERNAL_FRAMEWORK = "TrainingJob.v1.ml.example.com"
# Fair sharing between the ClusterQueues of a Cohort (Kueue's `fairSharing`; on once it is configured): admission
# and preemption by each queue's share of what it borrows, as Kueue's documentation configures it, with both of
# its preemption strategies in their documented order. It changes nothing for a ClusterQueue in no Cohort.
FAIR_SHARING = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
# Local clusters create thousands of Workloads in benchmarks; Kueue's 50 QPS default would be the bottleneck.
CLIENT_QPS = 200
CLIENT_BURST = 400


@dataclass(frozen=True)
class KueueLayout:
    """Kueue's files inside one cluster's directory."""

    cluster_root: Path
    pki: Path

    @property
    def root(self) -> Path:
        return self.cluster_root / "kueue"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.cluster_root / f"{CLIENT_CERT}.kubeconfig"

    @property
    def log(self) -> Path:
        return self.cluster_root / "logs" / "kueue.log"

    def cert_dir(self, use: str) -> Path:
        """webhook, visibility or metrics: each holds tls.crt and tls.key, as Kueue's Secret volumes do."""
        return self.root / "certs" / use

    def bind_mounts(self) -> dict[Path, Path]:
        """Our directory -> the fixed path Kueue reads it at."""
        return {self.cert_dir(use): target for use, target in FIXED_CERT_PATHS.items()}


def cert_specs() -> tuple[CertSpec, CertSpec]:
    """One serving certificate for every server of Kueue (the API server dials webhooks at 127.0.0.1 and checks the
    visibility server against its Service's name, as the aggregator does) and Kueue's client identity."""
    serving = CertSpec(
        SERVING_CERT,
        "kueue",
        server=True,
        dns_names=("localhost", f"{VISIBILITY_SERVICE}.{NAMESPACE}.svc", f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc"),
        ip_addresses=("127.0.0.1",),
    )
    client = CertSpec(
        CLIENT_CERT, USER, organizations=("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"), client=True
    )
    return serving, client


def configuration(layout: KueueLayout, ports: dict[str, int]) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): every server on 127.0.0.1 at this cluster's ports."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue-metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue-webhook"], "certDir": str(layout.cert_dir("webhook"))},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": ports["kueue-visibility"]},
        # One Kueue per cluster, and a restarted one must take over at once (tests restart it mid-run).
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": CLIENT_QPS, "burst": CLIENT_BURST},
        "manageJobsWithoutQueueName": False,
        "fairSharing": FAIR_SHARING,
        "integrations": {"frameworks": list(FRAMEWORKS), "externalFrameworks": [EXTERNAL_FRAMEWORK]},
        "multiKueue": {"externalFrameworks": [{"name": EXTERNAL_FRAMEWORK}]},
    }


def command(binary: Path, layout: KueueLayout) -> list[str]:
    return [str(binary), f"--config={layout.config}", f"--kubeconfig={layout.kubeconfig}", "--zap-log-level=info"]


def health_check(ports: dict[str, int]) -> HealthCheck:
    """Ready once its webhook server listens (Kueue's own readyz), so objects created after it are admitted."""
    return HealthCheck(f"http://127.0.0.1:{ports['kueue-health']}/readyz")
