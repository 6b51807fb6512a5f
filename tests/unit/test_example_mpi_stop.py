"""The MPI example's graceful stop and resume, for real with Debian's mpi4py (one rank: `python3 train_mpi.py`, as
its docstring says it runs without mpirun). Several ranks under mpirun agree in each epoch's allgather; the local
cluster's MPI job (tests/integration/test_roles_mpi.py) runs without checkpoints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.prerequisites import missing_prerequisite
from tests.unit.examples_support import REPO, stop_when_logged
from trainingjob import sdk

SCRIPT = REPO / "examples" / "mpi" / "train_mpi.py"
PYTHON = "/usr/bin/python3"  # Debian's, with python3-mpi4py (scripts/system-packages.sh)


def run_env(tmp_path: Path, epochs: int, **extra: str) -> dict[str, str]:
    hyperparameters = tmp_path / f"hyperparameters-{epochs}.json"
    hyperparameters.write_text(json.dumps({"epochs": epochs, "samples": 400}))
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO / "src"),
        "CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "TRAININGJOB_HYPERPARAMETERS_FILE": str(hyperparameters),
        **extra,
    }


def test_sigterm_stops_after_a_whole_epoch_with_a_checkpoint_that_the_next_attempt_resumes_from(
    tmp_path: Path,
) -> None:
    has_mpi4py = shutil.which(PYTHON) and subprocess.run([PYTHON, "-c", "import mpi4py"], check=False).returncode == 0
    if not has_mpi4py:
        missing_prerequisite("the MPI example needs Debian's python3-mpi4py: apt-get install python3-mpi4py")
    code, rest = stop_when_logged([PYTHON, str(SCRIPT)], run_env(tmp_path, 100000), "epoch 2:", timeout=120)
    assert code == 143, rest  # a stop, not a success
    saved = sdk.list_checkpoints(tmp_path / "checkpoints")[-1]
    assert saved.epoch >= 2 and f"stopped with checkpoint {saved.path}" in rest, rest
    assert json.loads(saved.path.read_text())["epoch"] == saved.epoch

    env = run_env(tmp_path, saved.epoch + 2, RESUME_FROM_CHECKPOINT="true")
    resumed = subprocess.run([PYTHON, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {saved.path} at epoch {saved.epoch + 1}" in resumed.stderr
    assert f"epoch {saved.epoch}:" not in resumed.stderr and f"epoch {saved.epoch + 2}:" in resumed.stderr
