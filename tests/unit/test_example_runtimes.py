"""examples/runtimes/: one ClusterTrainingRuntime per framework, each enough for a job that names it and says only
its framework and size to start on the local process nodes with the framework's example image."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import yaml

from trainingjob.api import constants as k
from trainingjob.api.runtimes import RuntimeSnapshot
from trainingjob.api.types import TrainingJob
from trainingjob.node.images.catalog import ImageCatalog
from trainingjob.reconcile.runtimes import resolve_runtime
from trainingjob.reconcile.validation import spec_errors

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUNTIMES = sorted((EXAMPLES / "runtimes").glob("*.yaml"))
NOW = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)


def test_there_is_one_runtime_per_framework() -> None:
    frameworks = sorted(yaml.safe_load(path.read_text())["spec"]["framework"] for path in RUNTIMES)
    assert frameworks == sorted(k.FRAMEWORKS)


@pytest.mark.parametrize("path", RUNTIMES, ids=lambda path: path.stem)
def test_a_job_naming_the_runtime_gets_a_runnable_spec(path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    assert (body["apiVersion"], body["kind"]) == (k.RUNTIME_API_VERSION, k.CLUSTER_RUNTIME_KIND)
    framework = body["spec"]["framework"]
    assert body["metadata"]["name"] == path.stem == f"{framework}-local"
    job = TrainingJob.from_body(
        {
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"framework": framework, "workers": 2, "runtimeRef": {"name": path.stem}},
        }
    )
    resolved = resolve_runtime(job, RuntimeSnapshot.from_body(body), NOW)
    assert resolved.problem is None and spec_errors(resolved.job.spec) == []
    assert resolved.job.spec.command and resolved.job.spec.scheduling.node_selector
    ImageCatalog(EXAMPLES / "images.yaml").lookup(resolved.job.spec.image)  # the local nodes can run it
