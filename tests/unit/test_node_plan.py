"""The local node's pure plans: network addresses, the image mapping, security contexts, the pod's /etc files,
and the atomic writer behind API-backed volumes."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest
import yaml

from trainingjob.node.images.catalog import ImageCatalog, ImageError, normalize_image
from trainingjob.node.network.netplan import PodNetwork, bridge_name, choose_subnet, pod_addresses
from trainingjob.node.network.sandbox import hosts_file, pod_hostname, resolv_conf
from trainingjob.node.runtime.security import capabilities, process_security, verify_run_as_non_root
from trainingjob.node.volumes.payload import PayloadError, write_payload

REPO = Path(__file__).resolve().parents[2]


def test_each_cluster_gets_its_own_bridge_and_a_free_subnet() -> None:
    assert len(bridge_name("/root/.cache/trainingjob/clusters/pytest")) <= 15
    assert bridge_name("/a") != bridge_name("/b")
    first = choose_subnet("/clusters/a", [])
    taken = [ipaddress.IPv4Network(first), ipaddress.IPv4Network("10.0.0.0/24")]
    second = choose_subnet("/clusters/a", taken)
    assert second != first and not ipaddress.IPv4Network(second).overlaps(ipaddress.IPv4Network(first))
    network = PodNetwork("tjbr0", first)
    assert network.gateway.endswith(".0.1") and network.node_ip(0).endswith(".0.2")
    assert network.pod_cidr(1).endswith(".2.0/24")
    assert pod_addresses("10.9.1.0/24")[0] == "10.9.1.1" and len(pod_addresses("10.9.1.0/24")) == 254


def test_each_bridge_has_a_fixed_locally_administered_unicast_mac() -> None:
    """The bridge's MAC is set, not taken from its ports: see PodNetwork.bridge_mac."""
    macs = {PodNetwork(bridge_name(f"/clusters/{n}"), "10.1.0.0/16").bridge_mac for n in range(200)}
    assert len(macs) == 200
    for mac in macs:
        octets = [int(part, 16) for part in mac.split(":")]
        assert len(octets) == 6 and octets[0] & 0x02 and not octets[0] & 0x01, mac
    assert PodNetwork("tjbr1", "10.1.0.0/16").bridge_mac == PodNetwork("tjbr1", "10.2.0.0/16").bridge_mac


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("docker.io/library/python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("ubuntu", "docker.io/library/ubuntu:latest"),
        ("team/app:1", "docker.io/team/app:1"),
        ("registry.example/trainingjob-examples/pytorch:0.1", "registry.example/trainingjob-examples/pytorch:0.1"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
    ],
)
def test_image_names_are_normalized_like_docker(name: str, normalized: str) -> None:
    assert normalize_image(name) == normalized


def test_the_image_mapping_file(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)")
    (tmp_path / "requirements.txt").write_text("")
    mapping = {
        "root": ".",
        "images": {
            "team/train:1": {
                "requirements": ["requirements.txt"],
                "files": {"/app/train.py": "train.py"},
                "workingDir": "/app",
                "user": "1000:2000",
                "env": {"PYTHONPATH": "/app"},
                "cmd": ["python", "train.py"],
            },
            "bad:1": {"user": "trainer"},
            "typo:1": {"workdir": "/app"},
        },
    }
    path = tmp_path / "images.yaml"
    path.write_text(yaml.safe_dump(mapping))
    catalog = ImageCatalog(path)
    image = catalog.lookup("docker.io/team/train:1")
    assert (image.uid, image.gid, image.working_dir, image.cmd) == (1000, 2000, "/app", ("python", "train.py"))
    assert image.files == {"/app/train.py": tmp_path / "train.py"}
    key = image.runtime_key("python 3.11")
    (tmp_path / "requirements.txt").write_text("numpy==2.0\n")
    assert image.runtime_key("python 3.11") != key  # a changed requirements file is a new venv
    for name, message in (("bad:1", "numeric"), ("typo:1", "unknown keys"), ("absent:1", "images.yaml")):
        with pytest.raises(ImageError, match=message):
            catalog.lookup(name)


def test_the_repository_mapping_loads() -> None:
    catalog = ImageCatalog(REPO / "examples" / "images.yaml")
    for name in catalog.names():
        catalog.lookup(name)
    assert catalog.lookup("python:3.11-slim").uid == 0


def pod(pod_context: dict | None = None) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"securityContext": pod_context or {}}}


def test_run_as_non_root_is_verified_like_the_kubelet() -> None:
    container = {"name": "c", "securityContext": {"runAsNonRoot": True}}
    assert verify_run_as_non_root(pod(), container, 0) == (
        'container has runAsNonRoot and image will run as root (pod: "p_ns(u)", container: c)'
    )
    assert verify_run_as_non_root(pod(), container, 1000) is None
    assert verify_run_as_non_root(pod({"runAsUser": 1000}), container, 0) is None
    explicit_root = {"name": "c", "securityContext": {"runAsNonRoot": True, "runAsUser": 0}}
    assert "runAsUser breaks non-root policy" in (verify_run_as_non_root(pod(), explicit_root, 1000) or "")
    assert verify_run_as_non_root(pod({"runAsNonRoot": True}), {"name": "c"}, 0) is not None


def test_identity_and_capabilities() -> None:
    settings = process_security(
        pod({"runAsUser": 5, "fsGroup": 30, "supplementalGroups": [40]}),
        {
            "name": "c",
            "securityContext": {"runAsGroup": 7, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
        },
        1000,
        1000,
    )
    assert (settings.uid, settings.gid, settings.groups) == (5, 7, (7, 40, 30))
    assert settings.no_new_privs and settings.read_only_root
    assert capabilities({"securityContext": {"capabilities": {"drop": ["ALL"]}}}) == frozenset()
    added = capabilities({"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["KILL"]}}})
    assert "NET_ADMIN" in added and "KILL" not in added and "CHOWN" in added and "SYS_ADMIN" not in added
    assert "SYS_ADMIN" in capabilities({"securityContext": {"privileged": True}})


def test_hosts_resolv_conf_and_hostname() -> None:
    worker = {
        "metadata": {"name": "job-worker-1", "namespace": "ns"},
        "spec": {"hostname": "job-worker-1", "subdomain": "job-workers"},
    }
    hosts = hosts_file(worker, "10.1.1.5")
    assert "10.1.1.5\tjob-worker-1.job-workers.ns.svc.cluster.local\tjob-worker-1\n" in hosts
    assert hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
    resolv = resolv_conf(worker, "10.1.0.2")
    assert resolv.splitlines()[0] == "nameserver 10.1.0.2"
    assert "search ns.svc.cluster.local svc.cluster.local cluster.local" in resolv and "options ndots:5" in resolv
    custom = {
        **worker,
        "spec": {
            "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
        },
    }
    assert resolv_conf(custom, "10.1.0.2") == "nameserver 1.1.1.1\noptions ndots:2\n"
    assert pod_hostname({"metadata": {"name": "plain"}, "spec": {}}) == "plain"
    fqdn = {
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"hostname": "h", "subdomain": "s", "setHostnameAsFQDN": True},
    }
    assert pod_hostname(fqdn) == "h.s.ns.svc.cluster.local"


def test_atomic_writer_swaps_whole_payloads(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    assert write_payload(volume, {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})
    assert (volume / "a").read_text() == "1" and (volume / "dir" / "b").read_text() == "2"
    first = os.readlink(volume / "..data")
    assert not write_payload(volume, {"a": (b"1", 0o644), "dir/b": (b"2", 0o600)})  # unchanged: nothing written
    assert write_payload(volume, {"a": (b"new", 0o644)})
    assert os.readlink(volume / "..data") != first and not (volume / first).exists()
    assert (volume / "a").read_text() == "new" and not (volume / "dir").exists()
    for bad in ("../escape", "/abs", "..hidden"):
        with pytest.raises(PayloadError):
            write_payload(volume, {bad: (b"x", 0o644)})
