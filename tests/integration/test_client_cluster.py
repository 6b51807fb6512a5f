"""trainingjob.client against the real API server and operator: a job's lifecycle (list, suspend, resume, scale,
delete, its code's ConfigMap collected with it), errors that carry the API server's words, logs followed from before
a worker starts to its end on a local process node, a script with its arguments, and the async twin with a
manifest. Simulated jobs (kwok's pods run nothing) where only the API matters; local nodes where code must run."""

from __future__ import annotations

import asyncio
import copy

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.jobs import job_manifest
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE
from trainingjob.client import (
    AlreadyExists,
    AsyncTrainingClient,
    Invalid,
    NotFound,
    TrainingClient,
    TrainingClientError,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

SIMULATED_IMAGE = "registry.example/train:1"
ON_LOCAL_NODES = {
    # The stdlib image runs as root; the operator's restricted default (runAsNonRoot) needs a user.
    "securityContext": RESTRICTED_CONTAINER,
    "scheduling": {"nodeSelector": LOCAL_NODE_SELECTOR, "tolerations": [LOCAL_NODE_TOLERATION]},
}


def noop() -> None:
    pass


def count(lines: int) -> None:
    for number in range(lines):
        print(f"line {number}", flush=True)


def config_map_exists(kube: Kube, namespace: str, name: str) -> bool:
    try:
        kube.core.read_namespaced_config_map(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture
def client(cluster, namespace: str):
    with TrainingClient(namespace, kubeconfig=str(cluster.kubeconfig)) as made:
        yield made


def test_a_job_is_listed_suspended_resumed_scaled_and_deleted_with_its_code(
    client: TrainingClient, kube: Kube, namespace: str
) -> None:
    name = client.train(noop, image=SIMULATED_IMAGE)  # kwok runs the pod until told otherwise
    assert client.wait(name, "Running", timeout=120).workers == 1
    assert [job.name for job in client.list()] == [name]
    assert config_map_exists(kube, namespace, f"{name}-code")
    client.suspend(name)
    assert client.wait(name, "Suspended", timeout=120).phase == "Suspended"
    client.resume(name)
    client.wait(name, "Running", timeout=120)
    assert client.scale(name, 3).workers == 3
    client.delete(name)
    with pytest.raises(NotFound):
        client.wait(name, timeout=120)
    wait_until(lambda: not config_map_exists(kube, namespace, f"{name}-code"), 120, "the code's ConfigMap collected")


def test_errors_carry_what_the_api_server_said(client: TrainingClient, kube: Kube, namespace: str) -> None:
    with pytest.raises(Invalid) as invalid:
        client.train(noop, name="bad", image=SIMULATED_IMAGE, workers=0)
    assert invalid.value.status == 422 and invalid.value.reason == "Invalid"
    assert "Invalid value: 0" in invalid.value.api_message, invalid.value.api_message  # the server's words, verbatim
    assert not config_map_exists(kube, namespace, "bad-code")  # deleted again: no job owns it
    with pytest.raises(NotFound) as missing:
        client.get("missing")
    assert missing.value.status == 404
    client.train(noop, name="twice", image=SIMULATED_IMAGE)
    with pytest.raises(AlreadyExists):
        client.train(noop, name="twice", image=SIMULATED_IMAGE)
    assert client.get("twice").name == "twice"  # the first job and its code are untouched
    assert config_map_exists(kube, namespace, "twice-code")
    with pytest.raises(TrainingClientError, match="not a TrainingJob"):
        client.submit({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})


def test_logs_follow_a_worker_from_before_it_starts_to_its_end(client: TrainingClient, tmp_path) -> None:
    name = client.train(count, func_args={"lines": 4}, image=STDLIB_IMAGE, spec=copy.deepcopy(ON_LOCAL_NODES))
    assert list(client.logs(name, follow=True)) == ["line 0", "line 1", "line 2", "line 3"]
    assert client.wait(name, timeout=180).phase == "Succeeded"

    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('argv', sys.argv[1:])\n")
    name = client.train(script=script, args=["--lr", 0.5], image=STDLIB_IMAGE, spec=copy.deepcopy(ON_LOCAL_NODES))
    assert client.wait(name, timeout=180).phase == "Succeeded"
    assert list(client.logs(name)) == ["argv ['--lr', '0.5']"]


def test_the_async_twin_submits_a_manifest_file_and_watches_it(cluster, namespace: str, tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_manifest("from-file", workers=2, complete_after="2s")))

    async def run() -> list[str]:
        async with AsyncTrainingClient(namespace, kubeconfig=str(cluster.kubeconfig)) as client:
            name = await client.submit(path)
            phases = []
            async for job in client.watch(name):
                if not phases or phases[-1] != job.phase:
                    phases.append(job.phase)
                if job.finished:
                    return phases
        return phases

    phases = asyncio.run(asyncio.wait_for(run(), 180))
    assert phases[-1] == "Succeeded" and "Running" in phases, phases
