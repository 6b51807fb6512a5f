"""The fallback of a node agent without root (forced here with TJ_LOCAL_NODE_ISOLATION=off): pods run as plain
processes in the host's network; what needs namespaces or mounts fails with a reason and a message that say so."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.kube import Kube, wait_until
from tests.local_node import local_pod, pod_log, pod_status, python_container, wait_for_phase, wait_for_waiting

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def plain_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    from trainingjob.cluster import control_plane

    if os.environ.get("TJ_USE_EXISTING_CLUSTER"):
        pytest.skip("starts a cluster of its own")
    name = f"plain-{uuid.uuid4().hex[:6]}"
    previous = os.environ.get("TJ_LOCAL_NODE_ISOLATION")
    os.environ["TJ_LOCAL_NODE_ISOLATION"] = "off"
    try:
        state = control_plane.up(name, nodes=1, local_nodes=1, say=lambda _: None)
    finally:
        if previous is None:
            os.environ.pop("TJ_LOCAL_NODE_ISOLATION")
        else:
            os.environ["TJ_LOCAL_NODE_ISOLATION"] = previous
    try:
        assert state.network is None
        kube = Kube(state.kubeconfig)
        wait_until(lambda: kube.has_service_account("default", "default"), 60, "the default ServiceAccount")
        yield kube
    finally:
        control_plane.down(name, say=lambda _: None)


def plain_pod(name: str, script: str, **fields: object) -> dict:
    container = python_container(script, **fields)
    del container["securityContext"]  # the default namespace enforces no PodSecurity level
    return local_pod(name, container)


def test_plain_processes_run_in_the_host_network(plain_cluster: Kube) -> None:
    kube = plain_cluster
    kube.core.create_namespaced_pod("default", plain_pod("plain", "import os; print('ran as', os.getuid())"))
    status = wait_for_phase(kube, "default", "plain", ("Succeeded", "Failed"))
    assert status["phase"] == "Succeeded", pod_log(kube, "default", "plain")
    assert pod_log(kube, "default", "plain") == "ran as 0\n"
    assert status["podIP"] == status["hostIP"] == "127.0.0.1"


def test_volumes_and_shared_ports_fail_with_clear_messages(plain_cluster: Kube) -> None:
    kube = plain_cluster
    with_volume = plain_pod("withvolume", "print(1)", volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}])
    with_volume["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    kube.core.create_namespaced_pod("default", with_volume)
    waiting = wait_for_waiting(kube, "default", "withvolume", ("CreateContainerError",))
    assert "without root" in waiting["message"] and "/scratch" in waiting["message"]

    port = _free_port()
    listen = f"import socket, time; s = socket.create_server(('0.0.0.0', {port})); time.sleep(300)"
    ports = [{"containerPort": port, "protocol": "TCP"}]
    kube.core.create_namespaced_pod("default", plain_pod("first", listen, ports=ports))
    wait_for_phase(kube, "default", "first", ("Running",))
    wait_until(lambda: _listening(port), 60, f"the first pod to listen on {port}")
    kube.core.create_namespaced_pod("default", plain_pod("second", listen, ports=ports))
    waiting = wait_for_waiting(kube, "default", "second", ("CreateContainerError",))
    assert f"port {port}/TCP is already in use" in waiting["message"]
    assert pod_status(kube, "default", "first")["phase"] == "Running"


def _free_port() -> int:
    """A port nothing holds now, below Linux's ephemeral range (32768-60999): a random port in that range can be
    some other connection's source port, and the node then refuses the first pod as "already in use" (the likely
    cause, not proven, of a CI run that waited 90 s for the first pod to run while 20000-39999 was drawn from)."""
    while True:
        port = 20000 + uuid.uuid4().int % 12000
        if not _listening(port):
            return port


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
