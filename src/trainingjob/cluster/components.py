"""Command lines and health checks of each control-plane component, as pure functions of the cluster layout.

Why pure: the flags are the part of the local cluster most worth reading and reviewing; keeping them free of
process handling makes them easy to test and to compare with what envtest and kind do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"
POD_CIDR = "10.244.0.1/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# kwok renews node leases this often (seconds); the node lifecycle controller's grace period is 50 s.
NODE_LEASE_SECONDS = 40
# Client rate limits of the controllers; upstream defaults (20 QPS) are tuned for real nodes, not thousands of
# fake pods created in seconds, and would make garbage collection the slowest part of every test.
CONTROLLER_QPS = 200
CONTROLLER_BURST = 400
# Native gang scheduling of Kubernetes 1.35 (alpha): the Workload API (scheduling.k8s.io/v1alpha1) in the API server
# and the GangScheduling plugin in kube-scheduler. The controller-manager has no Workload controller in 1.35.
GANG_FEATURE_GATES = "--feature-gates=GenericWorkload=true,GangScheduling=true"
GANG_RUNTIME_CONFIG = "--runtime-config=scheduling.k8s.io/v1alpha1=true"


@dataclass(frozen=True)
class Layout:
    """Files and ports of one cluster."""

    root: Path
    ports: dict[str, int]

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def kubeconfig(self, user: str) -> Path:
        return self.root / f"{user}.kubeconfig"

    @property
    def apiserver_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    def cert(self, stem: str) -> tuple[str, str]:
        return str(self.pki / f"{stem}.crt"), str(self.pki / f"{stem}.key")


@dataclass(frozen=True)
class HealthCheck:
    """An HTTPS (or HTTP) endpoint that answers 200 once a component is ready."""

    url: str
    client_cert: str | None = None
    verify_ca: bool = True


def etcd_command(binary: Path, layout: Layout) -> list[str]:
    client, peer = layout.ports["etcd"], layout.ports["etcd-peer"]
    cert, key = layout.cert("etcd-server")
    ca = str(layout.pki / "ca.crt")
    return [
        str(binary),
        "--name=tj",
        f"--data-dir={layout.root / 'etcd'}",
        f"--listen-client-urls=https://127.0.0.1:{client}",
        f"--advertise-client-urls=https://127.0.0.1:{client}",
        f"--listen-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=https://127.0.0.1:{peer}",
        f"--initial-cluster=tj=https://127.0.0.1:{peer}",
        f"--cert-file={cert}",
        f"--key-file={key}",
        f"--trusted-ca-file={ca}",
        "--client-cert-auth",
        f"--peer-cert-file={cert}",
        f"--peer-key-file={key}",
        f"--peer-trusted-ca-file={ca}",
        "--peer-client-cert-auth",
        # A disposable local cluster: durability across power loss is worth less than fast tests.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_command(
    binary: Path,
    layout: Layout,
    audit_policy: Path | None = None,
    bind_address: str = "127.0.0.1",
    gang_scheduling: bool = True,
    admission_config: Path | None = None,
) -> list[str]:
    """`bind_address`: 0.0.0.0 when local process nodes' pods must reach the API server through their network's
    gateway (clients still authenticate with certificates or tokens; anonymous requests get only health checks).
    `gang_scheduling`: serve the Workload API (alpha) that kube-scheduler's GangScheduling plugin reads.
    `admission_config`: the AdmissionConfiguration that gives admission webhooks the API server's client
    certificate (cluster/webhook_client.py); clusters created before it existed have none."""
    cert, key = layout.cert("apiserver")
    kubelet_cert, kubelet_key = layout.cert("apiserver-kubelet-client")
    etcd_cert, etcd_key = layout.cert("apiserver-etcd-client")
    pki = layout.pki
    command = [
        str(binary),
        f"--etcd-servers=https://127.0.0.1:{layout.ports['etcd']}",
        f"--etcd-cafile={pki / 'ca.crt'}",
        f"--etcd-certfile={etcd_cert}",
        f"--etcd-keyfile={etcd_key}",
        f"--bind-address={bind_address}",
        "--advertise-address=127.0.0.1",
        f"--secure-port={layout.ports['kube-apiserver']}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # No proxy routes the Service IP: pods of local process nodes reach the API server through their network's
        # gateway (KUBERNETES_SERVICE_HOST says so), so the `kubernetes` Service needs no endpoints.
        "--endpoint-reconciler-type=none",
        # Node first, as kubeadm does: local process nodes authenticate as system:node:<name> and may touch only
        # what their own pods reference; NodeRestriction limits their writes to their own Node, Lease and pods.
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        # `kubectl logs`: the API server calls the node's log endpoint with this client certificate and checks
        # the node's serving certificate against the cluster CA.
        f"--kubelet-client-certificate={kubelet_cert}",
        f"--kubelet-client-key={kubelet_key}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--allow-privileged=true",
        *aggregation_flags(layout),
        "--profiling=false",
        "--v=1",
    ]
    if audit_policy is not None:
        command += [
            f"--audit-policy-file={audit_policy}",
            f"--audit-log-path={layout.logs / 'audit.log'}",
            "--audit-log-format=json",
            "--audit-log-maxsize=500",
        ]
    if gang_scheduling:
        command += [GANG_FEATURE_GATES, GANG_RUNTIME_CONFIG]
    if admission_config is not None:
        command.append(f"--admission-control-config-file={admission_config}")
    return command


def aggregation_flags(layout: Layout) -> list[str]:
    """The aggregation layer, as kubeadm configures it: the API server proxies aggregated APIs (Kueue's visibility
    API) with the front-proxy client certificate, and the servers behind it trust the user it names in headers."""
    pki = layout.pki
    return [
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
    ]


def _served_component_flags(layout: Layout, name: str) -> list[str]:
    """Flags shared by controller-manager and scheduler: their own TLS health port, delegated authn/z."""
    kubeconfig = layout.kubeconfig(name)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.ports[name]}",
        f"--cert-dir={layout.root / name}",
        "--v=1",
    ]


def controller_manager_command(binary: Path, layout: Layout) -> list[str]:
    pki = layout.pki
    return [
        str(binary),
        *_served_component_flags(layout, "kube-controller-manager"),
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        # Backs the default StorageClass: PVCs bind to hostPath volumes under /tmp of this machine.
        "--enable-hostpath-provisioner=true",
        f"--kube-api-qps={CONTROLLER_QPS}",
        f"--kube-api-burst={CONTROLLER_BURST}",
        "--concurrent-gc-syncs=40",
        # A quota created before the controller monitors a resource it limits (a CRD's count/..., found by discovery
        # every 30s) lacks that resource's usage until the next full resync, and until then the API server refuses
        # every create it covers ("status unknown for quota"). Upstream's 5 minutes is long for a local cluster.
        "--resource-quota-sync-period=30s",
    ]


def scheduler_config(layout: Layout) -> str:
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "clientConnection:\n"
        f"  kubeconfig: {layout.kubeconfig('kube-scheduler')}\n"
        f"  qps: {CONTROLLER_QPS}\n"
        f"  burst: {CONTROLLER_BURST}\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
    )


def scheduler_command(binary: Path, layout: Layout, gang_scheduling: bool = True) -> list[str]:
    """`gang_scheduling`: the feature gates turn the GangScheduling plugin on in the default profile."""
    return [
        str(binary),
        *_served_component_flags(layout, "kube-scheduler"),
        f"--config={layout.root / 'kube-scheduler.yaml'}",
        *([GANG_FEATURE_GATES] if gang_scheduling else []),
    ]


def kwok_config(layout: Layout, stages: list[str]) -> str:
    """kwok's configuration plus our Stage documents (which replace kwok's built-in stages)."""
    options = (
        "apiVersion: config.kwok.x-k8s.io/v1alpha1\n"
        "kind: KwokConfiguration\n"
        "options:\n"
        f"  cidr: {POD_CIDR}\n"
        "  nodeIP: 10.96.0.2\n"
        f"  nodeLeaseDurationSeconds: {NODE_LEASE_SECONDS}\n"
        "  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake\n"
        f"  serverAddress: 127.0.0.1:{layout.ports['kwok']}\n"
        # kwok applies its defaults only when no config file is given, so every knob is spelled out here.
        "  manageAllNodes: false\n"
        "  enableDebuggingHandlers: false\n"
        "  enableProfilingHandler: false\n"
        "  enableContentionProfiling: false\n"
        "  podPlayStageParallelism: 8\n"
        "  nodePlayStageParallelism: 4\n"
        "  nodeLeaseParallelism: 4\n"
        "  podsOnNodeSyncParallelism: 2\n"
        "  enablePodsOnNodeSyncListPager: true\n"
        "  enablePodsOnNodeSyncStreamWatch: false\n"
    )
    return "---\n".join([options, *stages])


def kwok_command(binary: Path, layout: Layout) -> list[str]:
    return [str(binary), f"--kubeconfig={layout.kubeconfig('kwok')}", f"--config={layout.root / 'kwok.yaml'}"]


def health_checks(layout: Layout) -> dict[str, HealthCheck]:
    admin = str(layout.pki / "admin")
    return {
        "etcd": HealthCheck(f"https://127.0.0.1:{layout.ports['etcd']}/health", client_cert=admin),
        "kube-apiserver": HealthCheck(f"{layout.apiserver_url}/readyz", client_cert=admin),
        # Their serving certs are self-signed in their cert-dir; /healthz is readable without credentials.
        "kube-controller-manager": HealthCheck(
            f"https://127.0.0.1:{layout.ports['kube-controller-manager']}/healthz", verify_ca=False
        ),
        "kube-scheduler": HealthCheck(f"https://127.0.0.1:{layout.ports['kube-scheduler']}/healthz", verify_ca=False),
        "kwok": HealthCheck(f"http://127.0.0.1:{layout.ports['kwok']}/healthz"),
    }
