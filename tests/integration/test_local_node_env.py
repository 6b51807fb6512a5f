"""A local node builds a container's environment from every source, as the kubelet does, and pods reach the API
server where KUBERNETES_SERVICE_HOST/PORT say."""

from __future__ import annotations

import base64
import json

import pytest

from tests.kube import Kube
from tests.local_node import local_pod, pod_log, pod_status, python_container, wait_for_phase

pytestmark = pytest.mark.integration

PRINT_ENV = "import json, os, sys; print(json.dumps(dict(os.environ))); print(json.dumps(sys.argv[1:]))"


def run_and_read_env(kube: Kube, namespace: str, pod: dict) -> tuple[dict[str, str], list[str], dict]:
    kube.core.create_namespaced_pod(namespace, pod)
    name = pod["metadata"]["name"]
    status = wait_for_phase(kube, namespace, name, ("Succeeded", "Failed"))
    lines = pod_log(kube, namespace, name).splitlines()
    assert status["phase"] == "Succeeded", lines
    return json.loads(lines[0]), json.loads(lines[1]), status


def test_env_from_values_fields_resources_config_maps_and_secrets(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"LR": "0.1", "EPOCHS": "3"}}
    )
    secret = {"TOKEN": base64.b64encode(b"s3cret").decode()}
    kube.core.create_namespaced_secret(namespace, {"metadata": {"name": "creds"}, "data": secret})
    field = lambda path: {"valueFrom": {"fieldRef": {"fieldPath": path}}}  # noqa: E731
    env = [
        {"name": "BASE", "value": "base"},
        {"name": "EXPANDED", "value": "$(BASE)-$(LR)-$$(BASE)-$(UNDEFINED)"},
        {"name": "POD_NAME", **field("metadata.name")},
        {"name": "POD_NAMESPACE", **field("metadata.namespace")},
        {"name": "POD_UID", **field("metadata.uid")},
        {"name": "TEAM", **field("metadata.labels['team']")},
        {"name": "NOTE", **field("metadata.annotations['note']")},
        {"name": "NODE", **field("spec.nodeName")},
        {"name": "ACCOUNT", **field("spec.serviceAccountName")},
        {"name": "POD_IP", **field("status.podIP")},
        {"name": "HOST_IP", **field("status.hostIP")},
        {"name": "CPU_MILLIS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "CPU_REQUEST", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
        {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "TOKEN"}}},
        {"name": "OPTIONAL", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": True}}},
        {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "EPOCHS"}}},
    ]
    container = python_container(
        PRINT_ENV,
        env=env,
        envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CM_"}, {"secretRef": {"name": "creds"}}],
        args=["--name=$(POD_NAME)", "--escaped=$$(POD_NAME)"],
        resources={"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1500m", "memory": "128Mi"}},
    )
    pod = local_pod("envs", container)
    pod["metadata"].update(labels={"team": "vision"}, annotations={"note": "hello world"})
    variables, argv, status = run_and_read_env(kube, namespace, pod)
    uid = kube.core.read_namespaced_pod("envs", namespace).metadata.uid
    assert variables["EXPANDED"] == "base-$(LR)-$(BASE)-$(UNDEFINED)"  # envFrom's CM_LR is not LR
    assert (variables["POD_NAME"], variables["POD_NAMESPACE"], variables["POD_UID"]) == ("envs", namespace, uid)
    assert (variables["TEAM"], variables["NOTE"], variables["ACCOUNT"]) == ("vision", "hello world", "default")
    assert variables["NODE"].startswith("tj-local-")
    assert (variables["POD_IP"], variables["HOST_IP"]) == (status["podIP"], status["hostIP"])
    assert (variables["CPU_MILLIS"], variables["MEM_MI"], variables["CPU_REQUEST"]) == ("1500", "128", "1")
    assert variables["SECRET"] == "s3cret" and variables["TOKEN"] == "s3cret"
    assert "OPTIONAL" not in variables and variables["FROM_CM"] == "3"
    assert (variables["CM_LR"], variables["CM_EPOCHS"]) == ("0.1", "3")
    assert variables["HOSTNAME"] == "envs"
    assert argv == ["--name=envs", "--escaped=$(POD_NAME)"]
    # The CPU limit (1.5 cores, rounded up, capped at the machine) sizes thread pools.
    threads = str(min(2, int(kube.core.read_node(variables["NODE"]).status.allocatable["cpu"])))
    assert variables["OMP_NUM_THREADS"] == variables["MKL_NUM_THREADS"] == variables["OPENBLAS_NUM_THREADS"] == threads
    # The image's ENV is there, below the pod's, and its venv is first on PATH.
    assert variables["LANG"] == "C.UTF-8" and "/runtimes/" in variables["PATH"].split(":")[0]


def test_the_pod_env_wins_over_thread_defaults_and_the_image_env(kube: Kube, namespace: str) -> None:
    env = [{"name": "OMP_NUM_THREADS", "value": "7"}, {"name": "LANG", "value": "en_US.UTF-8"}]
    container = python_container(PRINT_ENV, env=env, resources={"limits": {"cpu": "1"}})
    variables, _, _ = run_and_read_env(kube, namespace, local_pod("overrides", container))
    assert variables["OMP_NUM_THREADS"] == "7" and variables["MKL_NUM_THREADS"] == "1"
    assert variables["LANG"] == "en_US.UTF-8"


def test_pods_reach_the_api_server_where_kubernetes_service_host_points(kube: Kube, namespace: str) -> None:
    script = """
import json, os, ssl, urllib.request
secrets = "/var/run/secrets/kubernetes.io/serviceaccount"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
context = ssl.create_default_context(cafile=f"{secrets}/ca.crt")
request = urllib.request.Request(
    f"https://{host}:{port}/api/v1/namespaces/{open(secrets + '/namespace').read()}/pods",
    headers={"Authorization": "Bearer " + open(secrets + "/token").read()},
)
try:
    urllib.request.urlopen(request, context=context)
except urllib.error.HTTPError as error:
    print(json.dumps({"host": host, "code": error.code, "body": json.loads(error.read())}))
"""
    kube.core.create_namespaced_pod(namespace, local_pod("apiclient", python_container(script)))
    wait_for_phase(kube, namespace, "apiclient", ("Succeeded",))
    answer = json.loads(pod_log(kube, namespace, "apiclient"))
    # TLS verified against the cluster CA at the gateway address, the token authenticated as the pod's
    # ServiceAccount, and RBAC (which grants it nothing) answered.
    assert answer["code"] == 403
    assert f"system:serviceaccount:{namespace}:default" in answer["body"]["message"]
    assert answer["host"] == pod_status(kube, namespace, "apiclient")["hostIP"].rsplit(".", 1)[0] + ".1"
