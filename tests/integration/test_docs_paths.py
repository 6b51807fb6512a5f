"""The docs' own paths, run as written: README.md's "Using the local cluster yourself" (a cluster, the CRDs and RBAC,
`tj cluster operator`, a real XGBoost job watched until it Succeeds with progress) and docs/serving.md's hand-off
(a model trained, then served and asked for a prediction), then the README's `tj cluster down`.

The commands are read out of the Markdown (the ```bash block after each `<!-- docs-test: NAME -->` marker), so the
test breaks when the docs drift from what works. They run in one bash session, on a cluster of their own named by
TJ_CLUSTER (which `tj cluster` reads, so `tj cluster up` and `down` in the docs act on it and not on a cluster
someone else on this machine uses)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from kubernetes import client as kubernetes_client
from kubernetes import config as kubernetes_config

from tests.integration.test_cli_jobs import REPO
from trainingjob.cluster import control_plane
from trainingjob.cluster.process import is_running

pytestmark = pytest.mark.integration

MARKER = re.compile(r"<!-- docs-test: ([a-z-]+)[^>]*-->\s*```bash\n(.*?)```", re.DOTALL)
# What each block must still contain for this test to mean what it says (a block rewritten without them is drift).
REQUIRED = {
    "local-cluster": (
        "tj cluster up",
        'eval "$(tj cluster env)"',
        "kubectl apply -f deploy/crd/ -f deploy/rbac/",
        "tj cluster operator",
        "tj submit -f examples/xgboost/trainingjob-local.yaml",
        "tj watch xgb-digits",
    ),
    "serving-handoff": (
        "kubectl apply -f examples/serving/trainingjob.yaml -f examples/serving/llmmodel.yaml",
        "tj watch digits",
        ":predict",
    ),
    "local-cluster-down": ("tj cluster down",),
}
CLUSTER = "docs-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]


def doc_blocks(*paths: Path) -> dict[str, str]:
    """The marked bash blocks of the given Markdown files, by marker name."""
    blocks: dict[str, str] = {}
    for path in paths:
        for name, code in MARKER.findall(path.read_text()):
            assert name not in blocks, f"two blocks are marked docs-test: {name}"
            blocks[name] = code
    return blocks


def test_the_docs_mark_the_blocks_this_test_runs() -> None:
    blocks = doc_blocks(REPO / "README.md", REPO / "docs" / "serving.md")
    assert sorted(blocks) == sorted(REQUIRED)
    for name, commands in REQUIRED.items():
        missing = [command for command in commands if command not in blocks[name]]
        assert not missing, f"docs-test block {name} no longer has {missing}"


def run_blocks(*codes: str, timeout: float, session: Path) -> subprocess.CompletedProcess[str]:
    """The blocks in one bash session from the repository root, as a reader would paste them; the shell's
    environment is kept in `session` afterwards and used by the next call, as the reader's shell would be."""
    if session.exists():
        environment = dict(line.split("=", 1) for line in session.read_text().split("\0") if "=" in line)
    else:
        environment = {key: value for key, value in os.environ.items() if key not in ("KUBECONFIG", "VIRTUAL_ENV")}
        environment["TJ_CLUSTER"] = CLUSTER
    script = "set -euo pipefail\n" + "\n".join(codes) + f"\nenv -0 > {shlex.quote(str(session))}\n"
    return subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )


def job_status(kubeconfig: Path, name: str) -> dict:
    api = kubernetes_client.CustomObjectsApi(kubernetes_config.new_client_from_config(str(kubeconfig)))
    return api.get_namespaced_custom_object("ml.example.com", "v1alpha1", "default", "trainingjobs", name)["status"]


def test_readme_local_cluster_and_serving_handoff_run_as_written(tmp_path: Path) -> None:
    if os.environ.get("TJ_USE_EXISTING_CLUSTER", "").lower() in ("1", "true", "yes"):
        pytest.skip("the README starts a local cluster of its own")
    blocks = doc_blocks(REPO / "README.md", REPO / "docs" / "serving.md")
    try:
        session = tmp_path / "shell.env"
        ran = run_blocks(blocks["local-cluster"], blocks["serving-handoff"], timeout=1500, session=session)
        output = ran.stdout + ran.stderr
        assert ran.returncode == 0, output[-6000:]
        assert "trainingjob default/xgb-digits succeeded" in output
        assert "trainingjob default/digits succeeded" in output
        assert '"ready": true, "checkpoint": "ckpt-00000003.npz"' in output
        assert '{"predictions": [0]}' in output

        state = control_plane.ClusterState.load(CLUSTER)
        assert state is not None and "operator" in state.pids
        trained = job_status(state.kubeconfig, "xgb-digits")
        assert trained["phase"] == "Succeeded"
        assert trained["progress"]["totalEpochs"] == 12 and trained["progress"]["epoch"] == 12  # the real reports
        assert trained["lastCheckpoint"]["path"]
        operator_pid = state.pids["operator"]

        down = run_blocks(blocks["local-cluster-down"], timeout=300, session=session)
        assert down.returncode == 0, down.stderr
        assert control_plane.ClusterState.load(CLUSTER) is None
        assert not is_running(operator_pid, marker=f"tj-cluster-{CLUSTER}-operator")  # down stopped it
    finally:
        control_plane.down(CLUSTER, say=lambda _: None)
