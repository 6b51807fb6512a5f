"""Local process nodes run pods for real: node registration, exit codes, signals, and the waiting reasons a
kubelet reports (ErrImagePull, CreateContainerConfigError, StartError)."""

from __future__ import annotations

import datetime
import signal
import uuid

import pytest
from kubernetes import client

from tests.kube import Kube, wait_until
from tests.local_node import (
    LOCAL_NODE_TOLERATION,
    NODE_LABEL,
    container_state,
    kill_container_process,
    local_node_names,
    local_pod,
    pod_log,
    pod_status,
    python_container,
    wait_for_phase,
)

pytestmark = pytest.mark.integration


def test_local_nodes_register_like_kubelets(kube: Kube) -> None:
    names = local_node_names(kube)
    assert len(names) >= 2
    for name in names:
        node = kube.api.sanitize_for_serialization(kube.core.read_node(name))
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True" and ready["reason"] == "KubeletReady"
        assert [a["type"] for a in node["status"]["addresses"]] == ["InternalIP"]
        assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0
        capacity = node["status"]["capacity"]
        assert int(capacity["cpu"]) >= 1 and capacity["memory"].endswith("Ki") and capacity["pods"] == "110"
        assert node["metadata"]["labels"][NODE_LABEL] == "process"
        taint = {k: v for k, v in LOCAL_NODE_TOLERATION.items() if k != "operator"}
        assert any({k: t.get(k) for k in ("key", "value", "effect")} == taint for t in node["spec"]["taints"])
        leases = client.CoordinationV1Api(kube.api)
        lease = kube.api.sanitize_for_serialization(leases.read_namespaced_lease(name, "kube-node-lease"))
        assert lease["spec"]["holderIdentity"] == name
        renewed = datetime.datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00"))
        assert datetime.datetime.now(datetime.UTC) - renewed < datetime.timedelta(seconds=40)


def test_a_pod_runs_and_succeeds_with_a_kubelet_status(kube: Kube, namespace: str) -> None:
    script = "import os, socket; print('hello from', socket.gethostname(), os.getuid(), os.getgid())"
    kube.core.create_namespaced_pod(namespace, local_pod("hello", python_container(script)))
    status = wait_for_phase(kube, namespace, "hello", ("Succeeded", "Failed"))
    assert status["phase"] == "Succeeded"
    terminated = container_state(status)["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    assert terminated["startedAt"] <= terminated["finishedAt"]
    entry = status["containerStatuses"][0]
    assert entry["containerID"].startswith("process://") and entry["imageID"].startswith("sha256:")
    assert entry["image"] == "python:3.11-slim" and entry["restartCount"] == 0
    assert status["podIP"] and status["hostIP"] and status["startTime"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Initialized"]["status"] == "True"
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "PodCompleted"
    assert pod_log(kube, namespace, "hello") == "hello from hello 1000 0\n"
    fields = kube.core.read_namespaced_pod("hello", namespace).metadata.managed_fields
    assert {entry.manager for entry in fields if entry.subresource == "status"} == {"tj-node-agent"}


def test_a_running_pod_reports_running_and_ready(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, local_pod("sleeper", python_container("import time; time.sleep(300)")))
    status = wait_for_phase(kube, namespace, "sleeper", ("Running",))
    wait_until(
        lambda: all(
            c["status"] == "True"
            for c in pod_status(kube, namespace, "sleeper")["conditions"]
            if c["type"] in ("Ready", "ContainersReady", "PodReadyToStartContainers", "PodScheduled", "Initialized")
        ),
        60,
        "every condition of the running pod to be True",
    )
    entry = pod_status(kube, namespace, "sleeper")["containerStatuses"][0]
    assert entry["ready"] is True and entry["started"] is True and "running" in entry["state"]
    assert status["podIPs"] == [{"ip": status["podIP"]}]


def test_an_exit_code_ends_in_failed_with_reason_error(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, local_pod("fails", python_container("import sys; sys.exit(7)")))
    status = wait_for_phase(kube, namespace, "fails", ("Succeeded", "Failed"))
    assert status["phase"] == "Failed"
    terminated = container_state(status)["terminated"]
    assert terminated["exitCode"] == 7 and terminated["reason"] == "Error"


def test_a_container_killed_by_a_signal_exits_128_plus_the_signal(kube: Kube, namespace: str) -> None:
    """As in any container runtime, the process is PID 1 of its namespace, which ignores signals it has no handler
    for; SIGKILL from outside (the OOM killer, an operator on the host) still ends it."""
    marker = f"victim-{uuid.uuid4().hex}"
    script = f"import time; tag = {marker!r}; time.sleep(300)"
    kube.core.create_namespaced_pod(namespace, local_pod("victim", python_container(script)))
    wait_for_phase(kube, namespace, "victim", ("Running",))
    kill_container_process(marker, signal.SIGKILL)
    status = wait_for_phase(kube, namespace, "victim", ("Failed",))
    terminated = container_state(status)["terminated"]
    assert terminated["exitCode"] == 137 and terminated["reason"] == "Error"


def test_an_unmapped_image_is_err_image_pull(kube: Kube, namespace: str) -> None:
    container = python_container("print(1)", image="registry.example/not-mapped:1")
    kube.core.create_namespaced_pod(namespace, local_pod("unmapped", container))
    waiting = wait_until(
        lambda: (
            container_state(pod_status(kube, namespace, "unmapped")).get("waiting", {}).get("reason")
            in ("ErrImagePull", "ImagePullBackOff")
            and container_state(pod_status(kube, namespace, "unmapped"))["waiting"]
        ),
        60,
        "ErrImagePull",
    )
    assert "images.yaml" in waiting["message"] and "registry.example/not-mapped:1" in waiting["message"]
    assert pod_status(kube, namespace, "unmapped")["phase"] == "Pending"


def test_run_as_non_root_meeting_a_root_image_is_create_container_config_error(kube: Kube, namespace: str) -> None:
    container = python_container("print(1)")
    del container["securityContext"]["runAsUser"]  # the image's user is 0
    kube.core.create_namespaced_pod(namespace, local_pod("rootimage", container))
    waiting = wait_until(
        lambda: (
            container_state(pod_status(kube, namespace, "rootimage")).get("waiting", {}).get("reason")
            == "CreateContainerConfigError"
            and container_state(pod_status(kube, namespace, "rootimage"))["waiting"]
        ),
        60,
        "CreateContainerConfigError",
    )
    uid = kube.core.read_namespaced_pod("rootimage", namespace).metadata.uid
    assert waiting["message"] == (
        f'container has runAsNonRoot and image will run as root (pod: "rootimage_{namespace}({uid})", container: main)'
    )


def test_a_missing_config_map_key_is_create_container_config_error(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"}, "data": {"a": "1"}})
    env = [{"name": "B", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "b"}}}]
    kube.core.create_namespaced_pod(namespace, local_pod("nokey", python_container("print(1)", env=env)))
    waiting = wait_until(
        lambda: (
            container_state(pod_status(kube, namespace, "nokey")).get("waiting", {}).get("reason")
            == "CreateContainerConfigError"
            and container_state(pod_status(kube, namespace, "nokey"))["waiting"]
        ),
        60,
        "CreateContainerConfigError",
    )
    assert waiting["message"] == f"couldn't find key b in ConfigMap {namespace}/settings"


def test_a_command_not_found_is_start_error_128(kube: Kube, namespace: str) -> None:
    container = python_container("", command=["no-such-program"])
    kube.core.create_namespaced_pod(namespace, local_pod("nocommand", container))
    status = wait_for_phase(kube, namespace, "nocommand", ("Failed",))
    terminated = container_state(status)["terminated"]
    assert terminated["exitCode"] == 128 and terminated["reason"] == "StartError"
    assert 'exec: "no-such-program": executable file not found in $PATH' in terminated["message"]


def test_termination_message_comes_from_the_file_or_the_log(kube: Kube, namespace: str) -> None:
    by_file = python_container("open('/dev/termination-log', 'w').write('saved 3 checkpoints')")
    by_log = python_container(
        "import sys; print('first'); print('last words'); sys.exit(2)",
        name="logged",
        terminationMessagePolicy="FallbackToLogsOnError",
    )
    kube.core.create_namespaced_pod(namespace, local_pod("messages", by_file, by_log))
    status = wait_for_phase(kube, namespace, "messages", ("Failed",))
    assert container_state(status, "main")["terminated"]["message"] == "saved 3 checkpoints"
    assert container_state(status, "logged")["terminated"]["message"] == "first\nlast words"
