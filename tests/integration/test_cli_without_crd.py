"""`tj` against a real cluster where the TrainingJob CRD is not installed: one clear line, not a 404 or traceback.

The session cluster has the CRD (and other tests need it), so this starts a small cluster of its own (one node,
a few seconds with built binaries) and removes it afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.operator_harness import REPO
from trainingjob.cli.kube_errors import CRD_MISSING

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crd_less_kubeconfig(cluster: object) -> Iterator[Path]:
    from trainingjob.cluster import control_plane

    name = f"nocrd-{uuid.uuid4().hex[:6]}"
    try:
        yield control_plane.up(name, nodes=1, say=lambda _: None, local_nodes=0).kubeconfig
    finally:
        control_plane.down(name, say=lambda _: None)


@pytest.mark.parametrize(
    "command",
    [
        ("get", "-A"),
        ("get", "-n", "default"),
        ("describe", "mnist", "-n", "default"),
        ("watch", "mnist", "-n", "default", "--timeout", "5"),
        ("submit", "-n", "default", "-f", "examples/pytorch-simulated.yaml"),
        ("delete", "mnist", "-n", "default"),
    ],
    ids=lambda command: command[0] + ("-all" if "-A" in command else ""),
)
def test_every_job_command_says_the_crd_is_missing(crd_less_kubeconfig: Path, command: tuple[str, ...]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainingjob.cli", *command, "--kubeconfig", str(crd_less_kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {CRD_MISSING}"
