"""From a notebook (docs/notebook.md): a real Jupyter kernel executes a notebook that defines a PyTorch training
function, submits it through trainingjob.client to the local cluster with two workers (on the local process nodes,
really running DDP over gloo), watches its progress with the live bar, prints both workers' logs, and then runs the
same function with the local backend as two local processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nbclient import NotebookClient

from tests.jobs import get_job
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION
from tests.notebook_support import EPOCHS, TORCH_IMAGE, notebook, stream_text, widget_states
from tests.prerequisites import missing_prerequisite
from tests.real_roles import RUN_TIMEOUT, log_tails
from tests.unit.examples_support import BY_FRAMEWORK

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def torch_python() -> str:
    python = BY_FRAMEWORK["pytorch"].runtime_python()
    if python is None:
        missing_prerequisite("the PyTorch runtime (make runtimes) is not built")
    return str(python)


def test_a_notebook_trains_on_the_cluster_and_locally_through_the_client(kube, namespace, cluster, tmp_path) -> None:
    parameters = {
        "NAMESPACE": namespace,
        "KUBECONFIG": str(cluster.kubeconfig),
        "IMAGE": TORCH_IMAGE,
        "EPOCHS": EPOCHS,
        "TIMEOUT": RUN_TIMEOUT,
        "SCHEDULING": {"nodeSelector": LOCAL_NODE_SELECTOR, "tolerations": [LOCAL_NODE_TOLERATION]},
        "LOCAL_PYTHON": torch_python(),
    }
    book = notebook(parameters)
    runner = NotebookClient(
        book,
        timeout=RUN_TIMEOUT,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        runner.execute()
    finally:
        Path(tmp_path / "executed.ipynb").write_text(str(book))
    submitted = stream_text(book, 2).split()
    assert submitted[0] == "submitted", stream_text(book, 2)
    name = submitted[1]
    job = get_job(kube, namespace, name)
    assert job is not None and job["status"]["phase"] == "Succeeded", log_tails(kube, namespace, name)

    # What the notebook showed: the wait's result, the live bar's last state, both ranks' logs.
    assert stream_text(book, 3).split() == ["phase", "Succeeded", "percent", "100.0", "epoch", str(EPOCHS)]
    bars = [state for state in widget_states(book) if state.get("_model_name") == "FloatProgressModel"]
    assert bars and bars[0]["value"] == 100.0 and bars[0]["bar_style"] == "success", bars
    logs = stream_text(book, 4)
    for worker in range(2):
        assert f"cluster worker {worker}: rank {worker}/2 epoch {EPOCHS} mean loss" in logs, logs

    # The code travelled in a ConfigMap the job owns (the garbage collector deletes it with the job).
    config_map = kube.core.read_namespaced_config_map(f"{name}-code", namespace)
    owners = [(ref.kind, ref.name, ref.uid) for ref in config_map.metadata.owner_references or []]
    assert owners == [("TrainingJob", name, job["metadata"]["uid"])]

    # The same function, run by the local backend: two processes with the same contract.
    local = stream_text(book, 5)
    assert "local phase Succeeded percent 100.0" in local, local
    for worker in range(2):
        assert f"local worker {worker}: rank {worker}/2 epoch {EPOCHS} mean loss" in local, local
