"""A TrainingJob whose workers really run on the local process nodes: the operator's pods, env contract and
headless Service work there (rank 1 reaches rank 0 at MASTER_ADDR:MASTER_PORT), `tj logs -f` streams a worker's
output, and the job Succeeds from the workers' real exit codes."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from tests.conftest import ClusterUnderTest
from tests.jobs import create_job, job_manifest, job_pods, wait_phase
from tests.kube import Kube
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE
from tests.operator_harness import REPO

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

WORKER = """
import os, socket, time
rank, master, port = int(os.environ["RANK"]), os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("0.0.0.0", port))
    server.settimeout(120)
    connection, _ = server.accept()
    print("rank 0 heard from", connection.recv(64).decode(), flush=True)
else:
    for _ in range(240):
        try:
            socket.create_connection((master, port), timeout=5).sendall(f"rank {rank}".encode())
            break
        except OSError:
            time.sleep(0.5)
    else:
        raise SystemExit(f"rank {rank} never reached {master}:{port}")
    print(f"rank {rank} reached {master}", flush=True)
for epoch in range(3):
    print(f"rank {rank} epoch {epoch}", flush=True)
    time.sleep(1)
"""


def local_job(name: str) -> dict:
    return job_manifest(
        name,
        workers=2,
        complete_after=None,
        image=STDLIB_IMAGE,
        command=["python3", "-u", "-c", WORKER],
        # The stdlib image runs as root; the operator's restricted default (runAsNonRoot) needs a user.
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        scheduling={"nodeSelector": dict(LOCAL_NODE_SELECTOR), "tolerations": [LOCAL_NODE_TOLERATION]},
    )


def test_a_trainingjob_runs_on_local_nodes_and_tj_logs_follows_a_worker(
    cluster: ClusterUnderTest, kube: Kube, namespace: str
) -> None:
    create_job(kube, namespace, local_job("real"))
    wait_phase(kube, namespace, "real", "Running", timeout=120)
    followed = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", "logs", "real", "-n", namespace, "--worker", "1", "-f"],
        capture_output=True,
        text=True,
        timeout=180,
        env={"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        check=False,
    )
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert lines[0].startswith("rank 1 reached real-worker-0.real-workers"), lines  # MASTER_ADDR, resolved by DNS
    assert lines[1:] == ["rank 1 epoch 0", "rank 1 epoch 1", "rank 1 epoch 2"]
    wait_phase(kube, namespace, "real", "Succeeded", timeout=120)
    worker_0 = kube.core.read_namespaced_pod_log(
        "real-worker-0", namespace, container="trainer", _preload_content=False
    ).data.decode()
    assert worker_0.splitlines()[0] == "rank 0 heard from rank 1"
    for pod in job_pods(kube, namespace, "real"):
        assert pod.spec.node_name.startswith("tj-local-")
        assert pod.status.container_statuses[0].state.terminated.exit_code == 0
