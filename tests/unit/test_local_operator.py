"""`tj cluster operator`: the command line and kubeconfig of a local cluster's operator (pure parts)."""

from __future__ import annotations

import sys
from pathlib import Path

from trainingjob.cluster import control_plane
from trainingjob.cluster.local_operator import OperatorPorts, operator_command, token_kubeconfig
from trainingjob.node.network.netplan import PodNetwork

NETWORK = PodNetwork(bridge="tj-br0", subnet="10.244.0.0/16").to_dict()


def state(network: dict | None) -> control_plane.ClusterState:
    return control_plane.ClusterState(
        name="dev",
        root=Path("/state/dev"),
        ports={"kube-apiserver": 6443},
        binaries={},
        pids={},
        nodes=4,
        versions={},
        local_nodes=1,
        network=network,
    )


def test_workers_on_local_nodes_report_to_the_gateway() -> None:
    command = operator_command(state(NETWORK), OperatorPorts(progress=4100, metrics=4101, webhook=4102), ["--x"])
    assert command[:4] == [sys.executable, "-m", "trainingjob.cli", "operator"]
    assert "--progress-bind=10.244.0.1" in command
    assert "--progress-url=https://10.244.0.1:4100" in command
    assert "--metrics-bind=127.0.0.1" in command and "--webhook-port=4102" in command
    assert f"--leader-election-identity={control_plane.command_marker(state(None), control_plane.OPERATOR)}" in command
    assert command[-1] == "--x"  # what follows -- goes to tj operator


def test_without_a_pod_network_workers_report_to_loopback() -> None:
    command = operator_command(state(None), OperatorPorts(progress=1, metrics=2, webhook=3))
    assert "--progress-url=https://127.0.0.1:1" in command


def test_the_operator_authenticates_as_its_service_account() -> None:
    document = token_kubeconfig(state(None), "a-token")
    assert document["users"] == [{"name": "trainingjob-system:trainingjob-operator", "user": {"token": "a-token"}}]
    assert document["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": "/state/dev/pki/ca.crt",
    }
