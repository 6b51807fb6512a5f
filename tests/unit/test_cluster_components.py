"""Pure parts of the local control plane: flags, configuration, stages, node manifests, version parsing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainingjob.cluster import components as c
from trainingjob.cluster.build import COMPONENT_SETS, parse_go_version, required_version
from trainingjob.cluster.control_plane import stage_documents
from trainingjob.cluster.manifests import bootstrap_objects, fake_node

PORTS = {
    "etcd": 2379,
    "etcd-peer": 2380,
    "kube-apiserver": 6443,
    "kube-controller-manager": 10257,
    "kube-scheduler": 10259,
    "kwok": 10247,
}
LAYOUT = c.Layout(Path("/state"), PORTS)


def flag_values(command: list[str]) -> dict[str, str]:
    return dict(arg.removeprefix("--").split("=", 1) for arg in command[1:] if "=" in arg)


def test_etcd_serves_tls_only_and_requires_client_certificates() -> None:
    command = c.etcd_command(Path("/bin/etcd"), LAYOUT)
    flags = flag_values(command)
    assert flags["listen-client-urls"] == "https://127.0.0.1:2379"
    assert flags["listen-peer-urls"].startswith("https://")
    assert "--client-cert-auth" in command and "--peer-client-cert-auth" in command


def test_apiserver_uses_node_and_rbac_authorization_tls_and_service_account_keys() -> None:
    flags = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT))
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["enable-admission-plugins"] == "NodeRestriction"
    assert flags["kubelet-client-certificate"] == "/state/pki/apiserver-kubelet-client.crt"
    assert flags["kubelet-certificate-authority"] == "/state/pki/ca.crt"
    assert flags["etcd-servers"] == "https://127.0.0.1:2379"
    assert flags["client-ca-file"] == "/state/pki/ca.crt"
    assert flags["service-account-signing-key-file"] == "/state/pki/sa.key"
    assert flags["bind-address"] == "127.0.0.1"
    assert "audit-policy-file" not in flags


def test_apiserver_audit_log_is_opt_in() -> None:
    flags = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT, Path("/p.yaml")))
    assert flags["audit-policy-file"] == "/p.yaml"
    assert flags["audit-log-path"] == "/state/logs/audit.log"


def test_the_api_server_presents_its_webhook_client_certificate_to_admission_webhooks() -> None:
    """cluster/webhook_client.py: both admission plugins read one kubeconfig whose `*` user is the certificate
    the operator's --webhook-client-ca/--webhook-client-name let in (issue 41)."""
    from trainingjob.cluster.pki import WEBHOOK_CLIENT_NAME, cluster_cert_specs
    from trainingjob.cluster.webhook_client import admission_configuration, webhook_kubeconfig

    flags = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT, admission_config=Path("/a.yaml")))
    assert flags["admission-control-config-file"] == "/a.yaml"
    assert "admission-control-config-file" not in flag_values(c.apiserver_command(Path("/x"), LAYOUT))
    config = admission_configuration(Path("/state/webhook-client.kubeconfig"))
    plugins = {p["name"]: p["configuration"]["kubeConfigFile"] for p in config["plugins"]}
    assert plugins == dict.fromkeys(
        ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"), "/state/webhook-client.kubeconfig"
    )
    [user] = webhook_kubeconfig(LAYOUT.pki)["users"]
    assert user["name"] == "*" and user["user"]["client-certificate"] == "/state/pki/apiserver-webhook-client.crt"
    spec = next(s for s in cluster_cert_specs("10.0.0.1") if s.file_stem == "apiserver-webhook-client")
    assert (spec.common_name, spec.client, spec.organizations) == (WEBHOOK_CLIENT_NAME, True, ())


def test_controller_manager_runs_default_controllers_and_hostpath_provisioner() -> None:
    command = c.controller_manager_command(Path("/bin/kcm"), LAYOUT)
    flags = flag_values(command)
    assert "controllers" not in flags  # default set: garbage collector, job, node lifecycle, ...
    assert flags["enable-hostpath-provisioner"] == "true"
    assert flags["use-service-account-credentials"] == "true"
    assert flags["kubeconfig"] == "/state/kube-controller-manager.kubeconfig"


def test_scheduler_config_points_at_its_own_kubeconfig() -> None:
    config = yaml.safe_load(c.scheduler_config(LAYOUT))
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"]["kubeconfig"] == "/state/kube-scheduler.kubeconfig"
    assert config["leaderElection"]["leaderElect"] is False


def test_kwok_config_carries_our_stages_and_manages_only_fake_nodes() -> None:
    documents = list(yaml.safe_load_all(c.kwok_config(LAYOUT, stage_documents())))
    options = documents[0]["options"]
    assert options["manageNodesWithAnnotationSelector"] == "kwok.x-k8s.io/node=fake"
    assert options["serverAddress"] == "127.0.0.1:10247"
    assert options["nodeLeaseDurationSeconds"] > 0 and options["nodeLeaseParallelism"] > 0
    stage_names = {d["metadata"]["name"] for d in documents[1:]}
    assert stage_names == {
        "tj-node-ready",
        "tj-node-heartbeat",
        "tj-node-not-ready",
        "tj-pod-running",
        "tj-pod-waiting",
        "tj-pod-succeed",
        "tj-pod-fail",
        "tj-pod-evict",
        "tj-pod-delete",
    }


def test_every_stage_reads_its_documented_annotations() -> None:
    text = "".join(stage_documents())
    docs = Path(__file__).resolve().parents[2] / "docs" / "local-cluster.md"
    documented = docs.read_text()
    for annotation in (
        "start-delay",
        "complete-after",
        "fail",
        "fail-after",
        "exit-code",
        "reason",
        "message",
        "evict",
        "evict-after",
        "delete-delay",
        "waiting-reason",
        "waiting-message",
        "not-ready",
    ):
        assert f'"sim.ml.example.com/{annotation}"' in text
        assert f"sim.ml.example.com/{annotation}`" in documented


def test_health_checks_cover_every_component() -> None:
    checks = c.health_checks(LAYOUT)
    assert set(checks) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    assert checks["kube-apiserver"].url == "https://127.0.0.1:6443/readyz"


@pytest.mark.parametrize("index", [0, 3, 99])
def test_fake_node_advertises_eight_gpus_and_is_managed_by_kwok(index: int) -> None:
    node = fake_node(index)
    assert node["metadata"]["name"] == f"tj-node-{index}"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["metadata"]["labels"]["accelerator"] == "nvidia-gpu"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_apiserver_binds_every_interface_only_when_asked() -> None:
    flags = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT, bind_address="0.0.0.0"))
    assert flags["bind-address"] == "0.0.0.0"
    assert flags["advertise-address"] == "127.0.0.1"


def test_bootstrap_objects_are_one_default_storage_class_node_access_the_gpu_exporter_service_and_n_nodes() -> None:
    objects = bootstrap_objects(5)
    kinds = [o["kind"] for o in objects]
    node_access = ["ClusterRoleBinding", "ClusterRole", "ClusterRoleBinding"]
    gpu_exporter = ["Namespace", "Service", "Role", "RoleBinding"]
    assert kinds == ["StorageClass", *node_access, *gpu_exporter] + ["Node"] * 5
    service = objects[5]
    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == ("gpu-operator", "nvidia-dcgm-exporter")
    annotations = objects[0]["metadata"]["annotations"]
    assert annotations["storageclass.kubernetes.io/is-default-class"] == "true"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("go1.26.8", (1, 26, 8)),
        ("go1.26", (1, 26)),
        ("1.25.0", (1, 25, 0)),
        ("go1.27rc1", (1, 27, 1)),
    ],
)
def test_parse_go_version(text: str, expected: tuple[int, ...]) -> None:
    assert parse_go_version(text) == expected


def test_versions_are_pinned_in_the_wrapper_modules() -> None:
    versions = {s.name: s.version for s in COMPONENT_SETS}
    assert versions["etcd"].startswith("v3.6.")
    assert versions["kubernetes"].startswith("v1.")
    assert versions["kwok"].startswith("v0.")


def test_required_version_reads_single_and_block_requires(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module x\n\ngo 1.26\n\nrequire (\n\tk8s.io/kubernetes v1.2.3\n)\nrequire a.b/c v0.1.0\n")
    assert required_version(go_mod, "k8s.io/kubernetes") == "v1.2.3"
    assert required_version(go_mod, "a.b/c") == "v0.1.0"


def test_native_gang_scheduling_is_on_in_the_api_server_and_scheduler_unless_turned_off() -> None:
    gates = "GenericWorkload=true,GangScheduling=true"
    apiserver = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT))
    assert apiserver["feature-gates"] == gates and apiserver["runtime-config"] == "scheduling.k8s.io/v1alpha1=true"
    assert flag_values(c.scheduler_command(Path("/bin/kube-scheduler"), LAYOUT))["feature-gates"] == gates
    off = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT, gang_scheduling=False))
    assert "feature-gates" not in off and "runtime-config" not in off
    assert "feature-gates" not in flag_values(c.scheduler_command(Path("/bin/kube-scheduler"), LAYOUT, False))


def test_apiserver_proxies_aggregated_apis_with_the_front_proxy_identity() -> None:
    flags = flag_values(c.apiserver_command(Path("/bin/kube-apiserver"), LAYOUT))
    assert flags["requestheader-client-ca-file"] == "/state/pki/front-proxy-ca.crt"
    assert flags["requestheader-allowed-names"] == "front-proxy-client"
    assert flags["proxy-client-cert-file"] == "/state/pki/front-proxy-client.crt"
    assert flags["requestheader-username-headers"] == "X-Remote-User"
