"""Runtimes (docs/runtimes.md) against the real API server, operator and local process nodes: a job naming a
ClusterTrainingRuntime runs with the runtime's image, resources and environment, its own fields win, the operator
records the runtime and generation it started from, and editing the runtime restarts and changes nothing of the
running job; a TrainingRuntime serves its namespace; what cannot start from a runtime is refused at admission."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.integration.test_real_frameworks import assert_every_rank_joined
from tests.jobs import create_job, env_of, get_job, job_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE
from tests.real_roles import log_of, wait_status
from trainingjob.api import constants as k
from trainingjob.client import TrainingClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]
EXAMPLE_RUNTIMES = sorted((Path(__file__).resolve().parents[2] / "examples" / "runtimes").glob("*.yaml"))

# Runs until told to finish (a file the test cannot write: the job is deleted instead), printing what it got.
WORKER = """
import os, threading
seen = [os.environ.get(name) for name in ("GREETING", "TEAM", "HYPERPARAM_LR")]
print("greeting", seen[0], "team", seen[1], "lr", seen[2], flush=True)
threading.Event().wait()
"""


def runtime(name: str, kind: str = k.CLUSTER_RUNTIME_KIND, **template: Any) -> dict[str, Any]:
    body = {
        "image": STDLIB_IMAGE,
        "command": ["python3", "-u", "-c", WORKER],
        "env": [{"name": "GREETING", "value": "from-runtime"}, {"name": "TEAM", "value": "platform"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "scheduling": {"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
        "securityContext": copy.deepcopy(RESTRICTED_CONTAINER),  # the stdlib image runs as root otherwise
        "hyperparameters": {"lr": 0.1},
        **template,
    }
    return {
        "apiVersion": k.RUNTIME_API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"framework": "pytorch", "template": body},
    }


def job(name: str, runtime_name: str, kind: str = k.CLUSTER_RUNTIME_KIND, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": name},
        "spec": {"framework": "pytorch", "runtimeRef": {"kind": kind, "name": runtime_name}, **spec},
    }


@pytest.fixture
def cluster_runtime(kube: Kube) -> Iterator[dict[str, Any]]:
    body = runtime(f"rt-{uuid.uuid4().hex[:8]}")
    created = kube.custom.create_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body)
    yield created
    kube.custom.delete_cluster_custom_object(
        k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body["metadata"]["name"]
    )


def container_of(kube: Kube, namespace: str, pod: str) -> Any:
    return kube.core.read_namespaced_pod(pod, namespace).spec.containers[0]


def test_a_job_gets_the_runtimes_fields_its_own_win_and_an_edit_of_the_runtime_leaves_it_alone(
    kube: Kube, namespace: str, cluster_runtime: dict[str, Any]
) -> None:
    name = cluster_runtime["metadata"]["name"]
    overrides = {
        "env": [{"name": "GREETING", "value": "from-job"}],
        "resources": {"limits": {"memory": "320Mi"}},
        "hyperparameters": {"lr": 0.5},
    }
    create_job(kube, namespace, job("from-runtime", name, workers=1, **overrides))
    running = wait_phase(kube, namespace, "from-runtime", "Running", timeout=180)

    # The runtime's image, command, placement and resources, under the job's own env, memory and hyperparameter.
    container = container_of(kube, namespace, "from-runtime-worker-0")
    assert container.image == STDLIB_IMAGE
    assert (container.resources.requests["cpu"], container.resources.limits["cpu"]) == ("100m", "500m")
    assert container.resources.limits["memory"] == "320Mi"
    env = env_of(job_pods(kube, namespace, "from-runtime")[0])
    assert (env["GREETING"], env["TEAM"], env["HYPERPARAM_LR"]) == ("from-job", "platform", "0.5")
    wait_until(
        lambda: "greeting from-job team platform lr 0.5" in log_of(kube, namespace, "from-runtime-worker-0"),
        120,
        "the worker's own account of its environment",
    )
    record = running["status"]["runtime"]
    assert (record["kind"], record["name"], record["generation"]) == (k.CLUSTER_RUNTIME_KIND, name, 1)
    assert record["template"]["image"] == STDLIB_IMAGE

    # An admin edits the runtime: the running job is neither restarted nor changed; a new job gets the new version.
    pod_uid = kube.core.read_namespaced_pod("from-runtime-worker-0", namespace).metadata.uid
    edited = {"spec": {"template": {"env": [{"name": "TEAM", "value": "research"}]}}}
    kube.custom.patch_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, name, edited)
    create_job(kube, namespace, job("after-edit", name, workers=1))
    later = wait_phase(kube, namespace, "after-edit", "Running", timeout=180)
    assert later["status"]["runtime"]["generation"] == 2
    assert env_of(job_pods(kube, namespace, "after-edit")[0])["TEAM"] == "research"
    current = get_job(kube, namespace, "from-runtime")
    assert current is not None and current["status"]["phase"] == "Running"
    assert current["status"].get("restartCount", 0) == 0
    assert current["status"]["runtime"] == record  # still the generation it started from
    assert kube.core.read_namespaced_pod("from-runtime-worker-0", namespace).metadata.uid == pod_uid
    assert env_of(job_pods(kube, namespace, "from-runtime")[0])["TEAM"] == "platform"


def test_a_namespaced_runtime_serves_its_namespace(kube: Kube, namespace: str) -> None:
    body = runtime("team-runtime", k.NAMESPACED_RUNTIME_KIND)
    kube.custom.create_namespaced_custom_object(
        k.GROUP, k.RUNTIME_VERSION, namespace, k.NAMESPACED_RUNTIME_PLURAL, body
    )
    create_job(kube, namespace, job("namespaced", "team-runtime", k.NAMESPACED_RUNTIME_KIND, workers=1))
    running = wait_phase(kube, namespace, "namespaced", "Running", timeout=180)
    assert running["status"]["runtime"]["kind"] == k.NAMESPACED_RUNTIME_KIND
    assert env_of(job_pods(kube, namespace, "namespaced")[0])["GREETING"] == "from-runtime"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"runtimeRef": {"name": "no-such-runtime"}}, "ClusterTrainingRuntime no-such-runtime does not exist"),
        ({"framework": "xgboost"}, "is for pytorch jobs, and this job's framework is xgboost"),
    ],
)
def test_admission_refuses_a_job_that_cannot_start_from_its_runtime(
    kube: Kube, namespace: str, cluster_runtime: dict[str, Any], spec: dict[str, Any], words: str
) -> None:
    body = job("refused", cluster_runtime["metadata"]["name"])
    body["spec"].update(spec)
    with pytest.raises(ApiException) as refused:
        create_job(kube, namespace, body)
    assert refused.value.status == 403 and words in refused.value.body, refused.value.body  # the webhook's denial


def test_without_a_runtime_image_and_command_are_still_required(kube: Kube, namespace: str) -> None:
    body = {"apiVersion": k.API_VERSION, "kind": k.KIND, "metadata": {"name": "bare"}, "spec": {"framework": "jax"}}
    with pytest.raises(ApiException) as refused:
        create_job(kube, namespace, body)
    assert "spec.image: Required value" in refused.value.body, refused.value.body
    assert "spec.command: Required value" in refused.value.body, refused.value.body


def count(lines: int) -> None:
    for number in range(lines):
        print(f"line {number}", flush=True)


def test_the_python_client_and_tj_submit_start_jobs_from_a_runtime(
    cluster, kube: Kube, namespace: str, cluster_runtime: dict[str, Any]
) -> None:
    """Neither names a framework, an image or a placement: the runtime gives them."""
    name = cluster_runtime["metadata"]["name"]
    with TrainingClient(namespace, kubeconfig=str(cluster.kubeconfig)) as client:
        trained = client.train(count, func_args={"lines": 2}, runtime=name)
        finished = client.wait(trained, timeout=180)
        assert finished.runtime == name and finished.body["spec"]["framework"] == "pytorch"
        assert list(client.logs(trained)) == ["line 0", "line 1"]
    submitted = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", "submit", "from-cli", "-n", namespace, "--runtime", name],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr
    running = wait_phase(kube, namespace, "from-cli", "Running", timeout=180)
    assert running["spec"]["runtimeRef"]["name"] == name and running["spec"]["framework"] == "pytorch"
    assert env_of(job_pods(kube, namespace, "from-cli")[0])["GREETING"] == "from-runtime"


def test_a_job_from_the_xgboost_example_runtime_trains_to_the_end(kube: Kube, namespace: str) -> None:
    """examples/runtimes/xgboost-local.yaml as written, and a job as its comment shows (its framework, size,
    epochs and checkpoint storage, which a runtime cannot give): the example's real collective runs on the local
    process nodes with the runtime's image, command and placement, and checkpoints to the end."""
    body = yaml.safe_load((EXAMPLE_RUNTIMES[0].parent / "xgboost-local.yaml").read_text())
    kube.custom.create_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body)
    try:
        spec = {
            "framework": "xgboost",
            "workers": 2,
            "hyperparameters": {"epochs": 2},
            "checkpoint": {"enabled": True, "storage": {"size": "1Gi", "accessModes": ["ReadWriteMany"]}},
        }
        create_job(kube, namespace, job("xgb-runtime", "xgboost-local", **spec))
        status = wait_status(kube, namespace, "xgb-runtime", lambda s: s.get("phase") == "Succeeded", "Succeeded")
    finally:
        kube.custom.delete_cluster_custom_object(k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, "xgboost-local")
    assert_every_rank_joined(kube, namespace, "xgb-runtime", 2)
    assert status["progress"]["epoch"] == 2 and status["lastCheckpoint"]["epoch"] == 2, status
    assert status.get("restartCount", 0) == 0 and status["runtime"]["name"] == "xgboost-local", status


@pytest.mark.parametrize("path", EXAMPLE_RUNTIMES, ids=lambda path: path.stem)
def test_the_example_runtimes_are_accepted_as_written(kube: Kube, path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    created = kube.custom.create_cluster_custom_object(
        k.GROUP, k.RUNTIME_VERSION, k.CLUSTER_RUNTIME_PLURAL, body, dry_run="All"
    )
    assert created["spec"] == body["spec"]  # nothing pruned, nothing defaulted
