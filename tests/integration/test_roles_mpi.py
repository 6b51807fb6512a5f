"""MPI with a launcher, for real on the local process nodes: Debian's Open MPI and mpi4py, mpirun in the launcher pod
starting one rank per worker through the operator's remote-start agent (no ssh), the job judged by the launcher.

What MPI saw is read back from the launcher's log, where mpirun forwards every rank's output: the world size and
the pod each rank ran in.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
import yaml

from tests.jobs import create_job, job_pods
from tests.kube import Kube, wait_until
from tests.operator_harness import REPO
from tests.prerequisites import missing_prerequisite
from tests.real_roles import RUN_TIMEOUT, log_of, status_of, wait_status
from trainingjob.api import constants as k

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

MANIFEST = REPO / "examples" / "mpi" / "trainingjob-local.yaml"


def mpi_world(log: str) -> dict:
    line = next(line for line in log.splitlines() if line.startswith("MPI world: "))
    return json.loads(line.removeprefix("MPI world: "))


def test_mpirun_in_the_launcher_starts_a_rank_on_every_worker_and_the_launcher_judges_the_job(
    kube: Kube, namespace: str
) -> None:
    if not shutil.which("mpirun"):
        missing_prerequisite("the MPI example needs Open MPI and mpi4py: apt-get install openmpi-bin python3-mpi4py")
    body = yaml.safe_load(MANIFEST.read_text())
    body["spec"]["hyperparameters"]["epochs"] = 200  # long enough to read a worker's log while the ranks run
    name = body["metadata"]["name"]
    create_job(kube, namespace, body)
    # Each worker's agent runs the Open MPI daemon mpirun sends it, once the request carried the job's key.
    worker_log = wait_until(
        lambda: "running for" in (log := log_of(kube, namespace, f"{name}-worker-0")) and log,
        RUN_TIMEOUT,
        "worker 0's agent to start mpirun's daemon",
        interval=1.0,
    )
    assert " orted " in worker_log
    status = wait_status(kube, namespace, name, lambda s: s.get("phase") == "Succeeded", "Succeeded")
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Succeeded"] == ["LauncherSucceeded"]

    launcher_log = log_of(kube, namespace, f"{name}-launcher-0")
    world = mpi_world(launcher_log)
    workers = body["spec"]["workers"]
    assert world["size"] == workers
    assert sorted(r["rank"] for r in world["ranks"]) == list(range(workers))
    # One rank per worker pod (slots=1 each), none on the launcher: the hostfile lists the workers only.
    assert sorted(r["host"] for r in world["ranks"]) == [f"{name}-worker-{i}" for i in range(workers)]
    final = json.loads(next(line for line in launcher_log.splitlines() if line.startswith("final: "))[7:])
    assert final["ranks"] == workers and final["accuracy"] > 0.9

    roles = status["roleStatuses"]
    assert roles["launcher"] == {"replicas": 1, "pending": 0, "running": 0, "succeeded": 1, "failed": 0}
    assert roles["worker"]["replicas"] == workers
    # The workers serve the launcher until the job ends; then they have nothing left to do and are deleted.
    remaining = {p.metadata.name for p in job_pods(kube, namespace, name) if p.metadata.deletion_timestamp is None}
    assert remaining <= {f"{name}-launcher-0"} | {f"{name}-worker-{i}" for i in range(workers)}
    assert status_of(kube, namespace, name)["phase"] == "Succeeded"
    secret = kube.core.read_namespaced_secret(f"{name}-mpi-key", namespace)
    assert secret.metadata.owner_references[0].name == name
    # The local cluster gangs the job (Workload API): the launcher is one of the gang's pods, counted in minCount.
    assert {key: status["gang"][key] for key in ("name", "minCount", "state")} == {
        "name": f"{name}-gang-0",
        "minCount": workers + 1,
        "state": "Scheduled",
    }
    launcher = kube.core.read_namespaced_pod(f"{name}-launcher-0", namespace)
    assert launcher.metadata.labels[k.LABEL_GANG] == f"{name}-gang-0"


# The example itself, with its rank 0 failing in its training loop at epoch 3 (its progress report raises, as a bug
# in a training step would): mpirun runs this `python3 -c` on every rank, and only rank 0 reports progress.
RANK_0_FAILS = (
    "import runpy, trainingjob_sdk as sdk; report = sdk.report_progress; "
    "sdk.report_progress = lambda **kw: (_ for _ in ()).throw(RuntimeError('rank 0 failed at epoch 3')) "
    "if kw['epoch'] == 3 else report(**kw); "
    "runpy.run_path('/app/train_mpi.py', run_name='__main__')"
)


def test_a_rank_that_fails_ends_mpirun_and_the_job_fails_by_its_policy_naming_the_rank(
    kube: Kube, namespace: str
) -> None:
    """It used to stay Running for good: rank 0's exit waited in MPI_Finalize for the other ranks, which waited in
    their allgather for rank 0, and mpirun never exited. The SDK now aborts the MPI job when a rank raises, the
    launcher fails, and the failurePolicy (backoffLimit 0 here) fails the job with the rank in its message."""
    if not shutil.which("mpirun"):
        missing_prerequisite("the MPI example needs Open MPI and mpi4py: apt-get install openmpi-bin python3-mpi4py")
    body = yaml.safe_load(MANIFEST.read_text())
    name = body["metadata"]["name"] = "mpi-rank-fails"
    body["spec"]["hyperparameters"]["epochs"] = 200
    body["spec"]["command"] = ["mpirun", "python3", "-c", RANK_0_FAILS]
    body["spec"]["backoffLimit"] = 0
    create_job(kube, namespace, body)
    failed_at = wait_until(
        lambda: "rank 0 failed at epoch 3" in log_of(kube, namespace, f"{name}-launcher-0") and time.monotonic(),
        RUN_TIMEOUT,
        "rank 0 to fail",
        interval=1.0,
    )
    status = wait_status(kube, namespace, name, lambda s: s.get("phase") == "Failed", "Failed")
    print(f"rank 0's traceback in the launcher's log to the job Failed: {time.monotonic() - failed_at:.1f}s")
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Failed"] == ["BackoffLimitExceeded"]
    message = status["message"]
    assert message.startswith(f"launcher 0 (pod {name}-launcher-0) failed with exit code "), message
    assert ": MPI rank 0 failed (RuntimeError) and aborted the MPI job; backoffLimit 0 reached" in message, message
    launcher_log = log_of(kube, namespace, f"{name}-launcher-0")
    assert "RuntimeError: rank 0 failed at epoch 3" in launcher_log
    assert "epoch 3:" in launcher_log and "epoch 4:" not in launcher_log  # it trained, then failed
    assert status["lastFailure"]["role"] == "launcher" and status["lastFailure"]["exitCode"] != 0
