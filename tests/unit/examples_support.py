"""What the tests of examples/<framework>/ share: the four examples, their manifests, each script imported as a
module, and an environment without anything a TrainingJob injects.

`clean_env` is autouse where a module binds it (`clean_env = examples_support.clean_env`; pytest finds fixtures by
module attribute), so that no launcher variable or default progress reporter of this process leaks into a test.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from trainingjob import sdk

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class Example:
    framework: str
    script: str
    library: str  # what importorskip needs for a real run
    suffix: str  # of its checkpoints; "" for a directory
    image: str  # its local runtime (examples/images.yaml), built by `make runtimes`

    @property
    def path(self) -> Path:
        return EXAMPLES / self.framework / self.script

    def runtime_python(self) -> Path | None:
        """The Python of the example's runtime venv if `make runtimes` built it (None otherwise)."""
        from trainingjob.node.images.catalog import ImageCatalog
        from trainingjob.node.images.runtimes import built_runtime

        runtime = built_runtime(ImageCatalog(EXAMPLES / "images.yaml").lookup(self.image))
        return runtime.bin_dir / "python3" if runtime is not None else None


IMAGES = "registry.example/trainingjob-examples"
EXAMPLE_LIST = [
    Example("pytorch", "train_ddp.py", "torch", ".pt", f"{IMAGES}/pytorch:0.1"),
    Example("tensorflow", "train_multiworker.py", "tensorflow", "", f"{IMAGES}/tensorflow:0.1-cpu"),
    Example("xgboost", "train_xgboost.py", "xgboost", ".json", f"{IMAGES}/xgboost:0.1"),
    Example("jax", "train_jax.py", "jax", ".npz", f"{IMAGES}/jax:0.1-cpu"),
]
BY_FRAMEWORK = {example.framework: example for example in EXAMPLE_LIST}
FRAMEWORKS = list(BY_FRAMEWORK)
FRAMEWORK_MANIFESTS = [(framework, kind) for framework in FRAMEWORKS for kind in ("cpu", "gpu")]

# Everything the operator may inject that a test run on this machine must not inherit.
LAUNCHER_ENV = (
    "CHECKPOINT_DIR",
    "CHECKPOINT_INTERVAL",
    "CHECKPOINT_KEEP_LAST",
    "RESUME_FROM_CHECKPOINT",
    "DISTRIBUTED_BACKEND",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TF_CONFIG",
    "DMLC_TRACKER_URI",
    "DMLC_TRACKER_PORT",
    "DMLC_TASK_ID",
    "DMLC_NUM_WORKER",
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
)


@functools.cache
def load(framework: str) -> ModuleType:
    """The example script imported as a module (it is a standalone file, not part of a package)."""
    example = BY_FRAMEWORK[framework]
    name = f"tj_example_{framework}"
    spec = importlib.util.spec_from_file_location(name, example.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    dont_write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in examples/
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write_bytecode
    return module


def manifest(framework: str, kind: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / framework / f"trainingjob-{kind}.yaml").read_text())


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (*LAUNCHER_ENV, "TRAININGJOB_PROGRESS_URL", "TRAININGJOB_WORKER_INDEX", "TRAININGJOB_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    sdk.set_default_reporter(None)
    yield
    sdk.set_default_reporter(None)


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything a TrainingJob injects, plus `extra`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in LAUNCHER_ENV and not name.startswith(("TRAININGJOB_", "HYPERPARAM_"))
    }
    return {**env, **extra}


def stop_when_logged(command: list[str], env: dict[str, str], marker: str, timeout: float = 600) -> tuple[int, str]:
    """Run an example, send it SIGTERM once its log (stderr) shows `marker`, as the kubelet would on a suspend; its
    exit code and the rest of its log."""
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    for line in child.stderr:
        if marker in line:
            child.send_signal(signal.SIGTERM)
            break
    _, rest = child.communicate(timeout=timeout)
    return child.returncode, rest
