"""`kubectl logs` through the API server to a local node's log endpoint: tail, timestamps, since, previous,
follow; and the endpoint refuses callers that are not the API server."""

from __future__ import annotations

import datetime
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import ClusterUnderTest
from tests.kube import Kube, wait_until
from tests.local_node import local_pod, python_container, wait_for_phase

pytestmark = pytest.mark.integration

COUNTER = """
import sys, time
for i in range(1, 6):
    print(f"line {i}", flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def kubectl(cluster: ClusterUnderTest, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [cluster.kubectl, f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_kubectl_logs_with_tail_timestamps_and_since(cluster: ClusterUnderTest, kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, local_pod("counter", python_container(COUNTER)))
    wait_for_phase(kube, namespace, "counter", ("Succeeded",))
    everything = kubectl(cluster, "logs", "counter", "-n", namespace)
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.splitlines() == ["line 1", "line 2", "line 3", "line 4", "line 5", "to stderr"]
    tail = kubectl(cluster, "logs", "counter", "-n", namespace, "--tail=2")
    assert tail.stdout.splitlines() == ["line 5", "to stderr"]
    stamped = kubectl(cluster, "logs", "counter", "-n", namespace, "--timestamps", "--tail=1").stdout.strip()
    stamp, text = stamped.split(" ", 1)
    assert text == "to stderr"
    moment = datetime.datetime.fromisoformat(stamp[:26] + "+00:00")
    assert abs(datetime.datetime.now(datetime.UTC) - moment) < datetime.timedelta(minutes=5)
    assert stamp.endswith("Z") and len(stamp.split(".")[1]) == 10  # nine fractional digits, then Z
    future = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert kubectl(cluster, "logs", "counter", "-n", namespace, f"--since-time={future}").stdout == ""
    assert len(kubectl(cluster, "logs", "counter", "-n", namespace, "--since=1h").stdout.splitlines()) == 6
    assert kubectl(cluster, "logs", "counter", "-n", namespace, "--limit-bytes=6").stdout == "line 1"


def test_kubectl_logs_follow_streams_until_the_container_ends(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    script = """
import time
print("started", flush=True)
time.sleep(3)
for i in range(3):
    print(f"epoch {i}", flush=True)
    time.sleep(0.5)
"""
    kube.core.create_namespaced_pod(namespace, local_pod("follower", python_container(script)))
    wait_for_phase(kube, namespace, "follower", ("Running", "Succeeded"))
    began = time.monotonic()
    followed = kubectl(cluster, "logs", "-f", "follower", "-n", namespace, timeout=120)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == ["started", "epoch 0", "epoch 1", "epoch 2"]
    assert time.monotonic() - began < 60
    assert wait_for_phase(kube, namespace, "follower", ("Succeeded", "Failed"))["phase"] == "Succeeded"


def test_previous_shows_the_log_of_the_last_terminated_attempt(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    script = """
import os, sys
first = not os.path.exists("/state/ran")
open("/state/ran", "w").close()
print("first attempt" if first else "second attempt", flush=True)
sys.exit(1 if first else 0)
"""
    container = python_container(script, volumeMounts=[{"name": "state", "mountPath": "/state"}])
    pod = local_pod("twice", container, restartPolicy="OnFailure", volumes=[{"name": "state", "emptyDir": {}}])
    kube.core.create_namespaced_pod(namespace, pod)
    wait_for_phase(kube, namespace, "twice", ("Succeeded",))
    assert kubectl(cluster, "logs", "twice", "-n", namespace).stdout == "second attempt\n"
    assert kubectl(cluster, "logs", "twice", "-n", namespace, "--previous").stdout == "first attempt\n"


def test_the_log_endpoint_refuses_callers_without_a_cluster_certificate(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_pod(namespace, local_pod("private", python_container(COUNTER)))
    status = wait_for_phase(kube, namespace, "private", ("Succeeded",))
    node = kube.core.read_node(kube.core.read_namespaced_pod("private", namespace).spec.node_name)
    port = node.status.daemon_endpoints.kubelet_endpoint.port
    url = f"https://{status['hostIP']}:{port}/containerLogs/{namespace}/private/main"
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def refused() -> bool:
        try:
            urllib.request.urlopen(url, context=context, timeout=10)
        except ssl.SSLError:
            return True  # the TLS handshake demands a client certificate
        except urllib.error.URLError as error:
            return isinstance(error.reason, ssl.SSLError) or "certificate" in str(error.reason)
        except ConnectionResetError:
            return True
        return False

    assert wait_until(refused, 30, "the endpoint to refuse an anonymous caller")
