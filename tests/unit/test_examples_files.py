"""The example directories examples/<framework>/ as files: every script compiles and imports with only the standard
library and the SDK (also as the image has it: the SDK directory copied as `trainingjob_sdk`, no site-packages); the
Dockerfiles copy what the manifests run, from a build context holding just that; a missing ML library is a clear
error and a bad configuration exits with code 2, which every manifest's failurePolicy turns into Fail; and the
manifests are what the README promises (CPU: no GPUs, gloo; GPU: GPUs, nccl; checkpoints, OnFailure, TTL).

What the scripts read (hyperparameters, launcher variables) is in test_examples_config.py; their training, resume
and checkpoint logic in test_examples_training.py.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import py_compile
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import trainingjob.sdk
from tests.unit import examples_support
from tests.unit.examples_support import (
    BY_FRAMEWORK,
    EXAMPLES,
    FRAMEWORK_MANIFESTS,
    FRAMEWORKS,
    child_env,
    load,
    manifest,
)
from trainingjob.api import constants as c

clean_env = examples_support.clean_env  # autouse: no launcher variable or default reporter leaks into a test

SDK_DIR = Path(trainingjob.sdk.__file__).parent
HEAVY = ("torch", "tensorflow", "keras", "xgboost", "jax", "jaxlib", "numpy")
# examples/images.yaml is the local nodes' image mapping, not a manifest.
# LLMModel manifests (examples/llmmodel, examples/serving) are tested by the serving tests, TrainingSweeps
# (sweep-*.yaml) by the sweep tests (tests/integration/test_sweeps.py runs examples/xgboost/sweep-local.yaml).
SERVING_EXAMPLES = ("llmmodel", "serving", "runtimes")  # runtimes: tests/unit/test_example_runtimes.py
MANIFESTS = sorted(
    p
    for p in EXAMPLES.rglob("*.yaml")
    if p.name != "images.yaml"
    and p.relative_to(EXAMPLES).parts[0] not in SERVING_EXAMPLES
    and not p.name.startswith("sweep-")
)


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


# --- the scripts as files --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_script_compiles(framework: str, tmp_path: Path) -> None:
    py_compile.compile(str(BY_FRAMEWORK[framework].path), cfile=str(tmp_path / "out.pyc"), doraise=True)


ISOLATED_IMPORT = textwrap.dedent(
    """
    import importlib.util, sys
    sys.path.insert(0, sys.argv[1])
    spec = importlib.util.spec_from_file_location("example", sys.argv[2])
    module = importlib.util.module_from_spec(spec)
    sys.modules["example"] = module
    spec.loader.exec_module(module)
    assert module.sdk.__name__ == "trainingjob_sdk", module.sdk.__name__
    heavy = sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[3].split(","))
    assert not heavy, heavy
    assert module.parse_hyperparameters(None) == module.DEFAULTS
    assert module.resume_point(sys.argv[1]) == (1, None)
    print("ok")
    """
)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_script_imports_without_ml_libraries_next_to_a_copied_sdk(framework: str, tmp_path: Path) -> None:
    """As in the image: the SDK directory copied as trainingjob_sdk; `-I -S` hides site-packages (so trainingjob and
    any ML library), and importing the script must not pull in torch, tensorflow, xgboost, jax or numpy."""
    shutil.copytree(SDK_DIR, tmp_path / "trainingjob_sdk", ignore=shutil.ignore_patterns("__pycache__"))
    heavy = ",".join(HEAVY)
    result = subprocess.run(
        [
            sys.executable,
            "-B",
            "-I",
            "-S",
            "-c",
            ISOLATED_IMPORT,
            str(tmp_path),
            str(BY_FRAMEWORK[framework].path),
            heavy,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dockerfile_copies_the_script_and_the_sdk_where_the_manifests_expect_them(framework: str) -> None:
    example = BY_FRAMEWORK[framework]
    dockerfile = (EXAMPLES / framework / "Dockerfile").read_text()
    assert f"COPY examples/{framework}/{example.script} /app/{example.script}" in dockerfile
    assert "COPY src/trainingjob/sdk /app/trainingjob_sdk" in dockerfile
    assert "USER 1000:1000" in dockerfile  # runAsNonRoot needs a numeric user
    for kind in ("cpu", "gpu"):
        assert f"/app/{example.script}" in manifest(framework, kind)["spec"]["command"]


def docker_context_includes(rules: list[str], path: str) -> bool:
    """Whether a .dockerignore keeps `path` in the build context: the last rule matching it or a parent decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: end + 1]) for end in range(len(parts))]
    keep = True
    for rule in rules:
        pattern = rule.removeprefix("!").rstrip("/")
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            keep = rule.startswith("!")
    return keep


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_build_context_holds_exactly_what_the_dockerfile_copies(framework: str) -> None:
    """BuildKit uses <Dockerfile>.dockerignore instead of the repository's (an allowlist made for the operator)."""
    example = BY_FRAMEWORK[framework]
    text = (EXAMPLES / framework / "Dockerfile.dockerignore").read_text()
    rules = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    sdk_files = [f"src/trainingjob/sdk/{p.name}" for p in SDK_DIR.iterdir() if p.is_file() and p.suffix != ".pyc"]
    for path in [f"examples/{framework}/{example.script}", *sdk_files]:
        assert docker_context_includes(rules, path), path
    for path in [
        "README.md",
        "src/trainingjob/operator/trainingjob/apply.py",
        f"examples/{framework}/trainingjob-cpu.yaml",
        ".venv",
    ]:
        assert not docker_context_includes(rules, path), path
    assert not docker_context_includes(rules, "src/trainingjob/sdk/__pycache__/reporter.cpython-311.pyc")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_missing_ml_library_is_a_clear_error(framework: str, tmp_path: Path) -> None:
    example = BY_FRAMEWORK[framework]
    if installed(example.library):
        pytest.skip(f"{example.library} is installed here")
    result = subprocess.run(
        [sys.executable, str(example.path)],
        env=child_env(CHECKPOINT_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "this example needs" in result.stderr
    assert "pip install" in result.stderr


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_invalid_hyperparameters_exit_with_code_2_before_importing_the_ml_library(
    framework: str, tmp_path: Path
) -> None:
    """Exit code 2 is what every manifest's failurePolicy fails the job on, instead of restarting it."""
    hyperparameters = tmp_path / "hyperparameters.json"
    hyperparameters.write_text(json.dumps({"epochs": "many"}))
    result = subprocess.run(
        [sys.executable, str(BY_FRAMEWORK[framework].path)],
        env=child_env(TRAININGJOB_HYPERPARAMETERS_FILE=str(hyperparameters), CHECKPOINT_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == load(framework).EXIT_INVALID_CONFIG == 2, result.stderr
    assert "hyperparameter epochs must be a int, got 'many'" in result.stderr


# --- the manifests ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_every_example_manifest_is_a_trainingjob(path: Path) -> None:
    documents = list(yaml.safe_load_all(path.read_text()))
    assert len(documents) == 1
    body = documents[0]
    assert body["kind"] == c.KIND
    assert len(body["metadata"]["name"]) <= c.MAX_JOB_NAME_LENGTH
    if path.parent.name == "seed-guide":  # seed 002's job as the guide writes it: v1, framework defaulted (pytorch)
        assert body["apiVersion"] == f"{c.GROUP}/{c.V1}" and "framework" not in body["spec"]
        return
    assert body["apiVersion"] == c.API_VERSION
    assert body["spec"]["framework"] in c.FRAMEWORKS
    if path.parent != EXAMPLES:
        assert body["spec"]["framework"] == path.parent.name


def test_every_framework_has_its_manifests_script_dockerfile_and_readme() -> None:
    for framework, example in BY_FRAMEWORK.items():
        for name in (example.script, "Dockerfile", "README.md", "trainingjob-cpu.yaml", "trainingjob-gpu.yaml"):
            assert (EXAMPLES / framework / name).is_file(), f"{framework}/{name}"
    names = [manifest(framework, kind)["metadata"]["name"] for framework, kind in FRAMEWORK_MANIFESTS]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cpu_manifest_runs_without_gpus_over_gloo(framework: str) -> None:
    spec = manifest(framework, "cpu")["spec"]
    assert spec["gpuPerWorker"] == 0
    assert spec["workers"] >= 2
    # XGBoost's collective ignores DISTRIBUTED_BACKEND; the operator's default without GPUs is gloo anyway.
    assert spec.get("networking", {}).get("backend", "gloo") == "gloo"
    if framework != "xgboost":
        assert spec["networking"]["backend"] == "gloo"
    assert "resources" in spec


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gpu_manifest_requests_gpus_and_nccl(framework: str) -> None:
    spec = manifest(framework, "gpu")["spec"]
    assert spec["gpuPerWorker"] >= 1
    assert spec["networking"]["backend"] == "nccl"
    assert c.GPU_RESOURCE not in spec["resources"].get("limits", {})  # GPUs come from gpuPerWorker
    assert spec["resources"]["requests"]["memory"]


@pytest.mark.parametrize(("framework", "kind"), FRAMEWORK_MANIFESTS)
def test_manifest_checkpoints_restarts_and_cleans_up(framework: str, kind: str) -> None:
    spec = manifest(framework, kind)["spec"]
    checkpoint = spec["checkpoint"]
    assert checkpoint["enabled"] is True
    assert checkpoint["storage"]["size"]
    assert checkpoint["interval"] >= 1 and checkpoint["keepLast"] >= 1
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["ttlSecondsAfterFinished"] > 0
    rules = spec["failurePolicy"]["rules"]
    assert {"exitCodes": [load(framework).EXIT_INVALID_CONFIG], "action": "Fail"} in rules
