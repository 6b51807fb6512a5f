"""Every example manifest in examples/ is accepted by the real API server's TrainingJob schema (OpenAPI and CEL), in
a namespace enforcing PodSecurity `restricted`, and nothing in it is silently pruned as an unknown field.

A server-side dry run (dryRun=All) validates, defaults and prunes exactly as a create would, without storing the
object, so no operator is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as c

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# examples/images.yaml is the local nodes' image mapping, not a manifest; LLMModel manifests (examples/llmmodel,
# examples/serving) are applied by tests/integration/test_serving_*.py.
SERVING_EXAMPLES = ("llmmodel", "serving", "runtimes")  # runtimes: tests/unit/test_example_runtimes.py
# TrainingSweeps (sweep-*.yaml) are applied as written by tests/integration/test_sweeps.py.
MANIFESTS = sorted(
    p
    for p in EXAMPLES.rglob("*.yaml")
    if p.name != "images.yaml"
    and not p.name.startswith("sweep-")
    and p.relative_to(EXAMPLES).parts[0] not in SERVING_EXAMPLES
)


def dry_run_create(kube: Kube, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    version = body["apiVersion"].rpartition("/")[2]  # v1alpha1, or v1 for seed 002's job as the guide writes it
    return kube.custom.create_namespaced_custom_object(c.GROUP, version, namespace, c.PLURAL, body, dry_run="All")


def _serves_trainingjobs(kube: Kube) -> bool:
    probe = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "probe"},
        "spec": {"framework": "pytorch", "image": "registry.example/train:1", "command": ["python", "train.py"]},
    }
    try:
        dry_run_create(kube, "default", probe)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture(scope="module", autouse=True)
def served_crd(kube: Kube, trainingjob_crd: None) -> None:
    """Established can precede the first successful create by a moment."""
    wait_until(lambda: _serves_trainingjobs(kube), 30, "TrainingJobs to be served")


def missing(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Paths under `expected` whose value `actual` lacks or changed (`actual` may have more: defaults)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [path or "."]
        return [found for key, value in expected.items() for found in missing(value, actual.get(key), f"{path}.{key}")]
    return [] if expected == actual else [f"{path}: {expected!r} became {actual!r}"]


def test_the_examples_are_all_found() -> None:
    directories = {path.parent.name for path in MANIFESTS if path.parent != EXAMPLES}
    assert directories == {"pytorch", "tensorflow", "xgboost", "jax", "mpi", "seed-guide"}
    assert len(MANIFESTS) >= 8


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_example_manifest_is_accepted_by_the_api_server(kube: Kube, namespace: str, path: Path) -> None:
    body = yaml.safe_load(path.read_text())
    try:
        created = dry_run_create(kube, namespace, body)
    except ApiException as error:
        pytest.fail(f"{path.relative_to(EXAMPLES)} rejected ({error.status}): {error.body}")
    assert created["metadata"]["name"] == body["metadata"]["name"]
    assert created["spec"]["framework"] == body["spec"].get("framework", "pytorch")  # v1 defaults it
    assert missing(body["spec"], created["spec"], "spec") == []  # nothing pruned or rewritten
    assert created["spec"]["networking"]["masterPort"] == body["spec"].get("networking", {}).get(
        "masterPort", c.DEFAULT_MASTER_PORT
    )
