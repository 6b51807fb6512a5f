"""The training examples in examples/<framework>/: scripts, Dockerfiles and TrainingJob manifests.

Proves, without any ML library: every script compiles and imports with only the standard library and the SDK
(also as the image has it: the SDK directory copied as `trainingjob_sdk`, no site-packages); the shared pure parts
behave the same in all four (hyperparameters from TRAININGJOB_HYPERPARAMETERS_FILE over the defaults, the resume
point from CHECKPOINT_DIR and RESUME_FROM_CHECKPOINT, the checkpoint cadence, the synthetic data); each script reads
the launcher variables the operator really injects for its own manifests; a bad configuration exits with code 2,
which every manifest's failurePolicy turns into Fail; and the manifests are what the README promises (CPU: no GPUs,
gloo; GPU: GPUs, nccl; checkpoints, OnFailure, TTL).

Where the ML library is installed, each script also trains 2 epochs for real and a restarted run resumes at epoch 3
(skipped otherwise: torch, tensorflow, xgboost and jax are too big to install for tests).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

import trainingjob.sdk
from trainingjob import sdk
from trainingjob.api import constants as c
from trainingjob.api.types import TrainingJob
from trainingjob.builders.configmap import desired_config_data
from trainingjob.builders.env import worker_env

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SDK_DIR = Path(trainingjob.sdk.__file__).parent
HEAVY = ("torch", "tensorflow", "keras", "xgboost", "jax", "jaxlib", "numpy")


@dataclass(frozen=True)
class Example:
    framework: str
    script: str
    library: str  # what importorskip needs for a real run
    suffix: str  # of its checkpoints; "" for a directory

    @property
    def path(self) -> Path:
        return EXAMPLES / self.framework / self.script


EXAMPLE_LIST = [
    Example("pytorch", "train_ddp.py", "torch", ".pt"),
    Example("tensorflow", "train_multiworker.py", "tensorflow", ""),
    Example("xgboost", "train_xgboost.py", "xgboost", ".json"),
    Example("jax", "train_jax.py", "jax", ".npz"),
]
BY_FRAMEWORK = {example.framework: example for example in EXAMPLE_LIST}
FRAMEWORKS = list(BY_FRAMEWORK)
MANIFESTS = sorted(EXAMPLES.rglob("*.yaml"))
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


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


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
        "src/trainingjob/operator/apply.py",
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


# --- hyperparameters -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hyperparameters_default_without_a_file(framework: str, tmp_path: Path) -> None:
    module = load(framework)
    assert module.parse_hyperparameters(None) == module.DEFAULTS
    assert module.parse_hyperparameters("") == module.DEFAULTS
    assert module.parse_hyperparameters(tmp_path / "missing.json") == module.DEFAULTS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hyperparameters_from_the_file_take_the_type_of_their_default(framework: str, tmp_path: Path) -> None:
    module = load(framework)
    path = tmp_path / "hyperparameters.json"
    path.write_text(json.dumps({"epochs": 3.0, "learningRate": 1, "seed": "7", "somethingElse": True}))
    params = module.parse_hyperparameters(path)
    assert params == {**module.DEFAULTS, "epochs": 3, "learningRate": 1.0, "seed": 7}
    assert type(params["epochs"]) is int
    assert type(params["learningRate"]) is float
    assert "somethingElse" not in params  # unknown keys are ignored (with a warning)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object, not list"),
        (json.dumps({"epochs": True}), "hyperparameter epochs must be a int, got True"),
        (json.dumps({"epochs": 2.5}), "hyperparameter epochs must be a int, got 2.5"),
        (json.dumps({"learningRate": "fast"}), "hyperparameter learningRate must be a float, got 'fast'"),
        (json.dumps({"epochs": 0}), "hyperparameter epochs must be positive, got 0"),
        (json.dumps({"learningRate": -0.1}), "hyperparameter learningRate must be positive, got -0.1"),
    ],
)
def test_invalid_hyperparameters_are_config_errors(framework: str, content: str, message: str, tmp_path: Path) -> None:
    module = load(framework)
    path = tmp_path / "hyperparameters.json"
    path.write_text(content)
    with pytest.raises(module.ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        module.parse_hyperparameters(path)


def test_framework_specific_hyperparameter_checks(tmp_path: Path) -> None:
    path = tmp_path / "hyperparameters.json"
    cases = [
        ("pytorch", {"numClasses": 1}, "numClasses must be at least 2"),
        ("tensorflow", {"numClasses": 1}, "numClasses must be at least 2"),
        ("xgboost", {"noise": -1}, "noise must not be negative"),
        ("xgboost", {"device": "tpu"}, "device must be cpu, cuda or cuda:<n>"),
        ("jax", {"noise": -1}, "noise must not be negative"),
    ]
    for framework, given, message in cases:
        path.write_text(json.dumps(given))
        with pytest.raises(load(framework).ConfigError, match=message):
            load(framework).parse_hyperparameters(path)
    path.write_text(json.dumps({"device": "cuda:1", "treeMethod": "approx"}))
    params = load("xgboost").parse_hyperparameters(path)
    assert load("xgboost").booster_parameters(params) == {
        "objective": "reg:squarederror",
        "eval_metric": "rmse",
        "eta": 0.1,
        "max_depth": 6,
        "tree_method": "approx",
        "device": "cuda:1",
        "seed": 42,
    }


# --- resuming: every framework, through the pure functions ---------------------------------------------------------


def write_checkpoint(directory: Path, epoch: int, suffix: str) -> Path:
    """A checkpoint as the framework's script names it: a file with its suffix, or a directory (TensorFlow)."""

    def write(path: Path) -> None:
        if suffix:
            path.write_bytes(b"state")
        else:
            path.mkdir()
            (path / "model.weights.h5").write_bytes(b"weights")

    return sdk.save_checkpoint(write, epoch=epoch, directory=directory, suffix=suffix, report=False)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_first_attempt_starts_at_epoch_1_even_if_checkpoints_exist(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load(framework)
    write_checkpoint(tmp_path, 4, BY_FRAMEWORK[framework].suffix)
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    assert module.resume_point() == (1, None)  # RESUME_FROM_CHECKPOINT unset
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "false")
    assert module.resume_point() == (1, None)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_restarted_attempt_without_checkpoints_starts_at_epoch_1(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load(framework)
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert module.resume_point(tmp_path) == (1, None)
    assert module.resume_point(tmp_path / "never-created") == (1, None)
    (tmp_path / ".ckpt-00000003.pt.tmp-12-abcd").write_bytes(b"interrupted save")
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert module.resume_point(tmp_path) == (1, None)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_restarted_attempt_continues_after_the_newest_checkpoint(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load(framework)
    suffix = BY_FRAMEWORK[framework].suffix
    for epoch in (2, 10, 9):
        write_checkpoint(tmp_path, epoch, suffix)
    (tmp_path / f".ckpt-00000011{suffix}.tmp-12-abcd").write_bytes(b"interrupted save")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert module.resume_point() == (11, tmp_path / f"ckpt-00000010{suffix}")


@pytest.mark.parametrize(
    ("interval", "total", "expected"),
    [(1, 3, [1, 2, 3]), (2, 5, [2, 4, 5]), (3, 6, [3, 6]), (10, 4, [4]), (0, 2, [1, 2])],
)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_checkpoint_cadence(framework: str, interval: int, total: int, expected: list[int]) -> None:
    """Every CHECKPOINT_INTERVAL epochs and after the last, so the finished model is always saved."""
    module = load(framework)
    assert [epoch for epoch in range(1, total + 1) if module.should_checkpoint(epoch, interval, total)] == expected


def simulated_run(module: ModuleType, epochs: int, suffix: str) -> tuple[int, list[int]]:
    """A script's epoch loop with the training left out: where it starts and which epochs it trains."""
    start, _ = module.resume_point()
    trained = []
    for epoch in range(start, epochs + 1):
        trained.append(epoch)
        if module.should_checkpoint(epoch, sdk.checkpoint_interval(), epochs):
            sdk.save_checkpoint(
                lambda path: Path(path).write_bytes(b"state"),
                epoch=epoch,
                keep_last=sdk.checkpoint_keep_last(),
                suffix=suffix or ".bin",
            )
    return start, trained


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_epochs_then_a_restart_resumes_at_epoch_3(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load(framework)
    suffix = BY_FRAMEWORK[framework].suffix
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("CHECKPOINT_INTERVAL", "1")
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "2")
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "false")
    assert simulated_run(module, 2, suffix) == (1, [1, 2])
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert simulated_run(module, 4, suffix) == (3, [3, 4])
    assert [info.epoch for info in sdk.list_checkpoints(tmp_path)] == [3, 4]  # pruned to CHECKPOINT_KEEP_LAST


# --- the scripts' own checkpoint code, with stand-ins for the model (no ML library needed) -------------------------


class FakeKerasModel:
    def __init__(self) -> None:
        self.saved: list[Path] = []
        self.loaded: list[str] = []

    def save_weights(self, path: str) -> None:
        assert path.endswith(".weights.h5")  # what Keras 3 insists on
        Path(path).write_bytes(b"weights")
        self.saved.append(Path(path))

    def load_weights(self, path: str) -> None:
        assert Path(path).read_bytes() == b"weights"
        self.loaded.append(path)


def test_tensorflow_checkpoints_are_weight_directories_and_every_worker_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load("tensorflow")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "1")
    chief, other = FakeKerasModel(), FakeKerasModel()
    path = module.save_checkpoint(chief, 2, is_chief=True)
    assert path == tmp_path / "ckpt-00000002"
    assert (path / "model.weights.h5").read_bytes() == b"weights"
    assert module.save_checkpoint(other, 2, is_chief=False) is None
    assert len(other.saved) == 1 and not other.saved[0].exists()  # written to scratch, then removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000002"]
    module.save_checkpoint(chief, 3, is_chief=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000003"]  # keep last 1
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    start, checkpoint = module.resume_point()
    assert start == 4
    module.load_checkpoint(other, checkpoint)
    assert other.loaded == [str(tmp_path / "ckpt-00000003" / "model.weights.h5")]


class FakeBooster:
    def save_raw(self, raw_format: str) -> bytearray:
        assert raw_format == "json"
        return bytearray(b'{"learner": {}}')


def test_xgboost_checkpoints_are_the_model_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("xgboost")
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    path = module.save_checkpoint(FakeBooster(), 4)
    assert path == tmp_path / "ckpt-00000004.json"
    assert json.loads(path.read_text()) == {"learner": {}}


# --- data ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_classification_data_is_deterministic_and_well_formed(framework: str) -> None:
    module = load(framework)
    features, labels = module.make_dataset(100, 5, 3, seed=1)
    assert len(features) == len(labels) == 100
    assert all(len(row) == 5 for row in features)
    assert set(labels) == {0, 1, 2}
    assert module.make_dataset(100, 5, 3, seed=1) == (features, labels)
    assert module.make_dataset(100, 5, 3, seed=2) != (features, labels)


def test_regression_data_is_deterministic_and_well_formed() -> None:
    features, targets = load("xgboost").make_dataset(50, 4, 0.1, seed=1)
    assert len(features) == len(targets) == 50 and all(len(row) == 4 for row in features)
    assert load("xgboost").make_dataset(50, 4, 0.1, seed=1) == (features, targets)
    features, targets, weights, bias = load("jax").make_dataset(50, 4, 0.0, seed=1)
    assert len(weights) == 4
    for row, target in zip(features, targets, strict=True):  # noise 0: exactly linear
        assert target == pytest.approx(sum(w * x for w, x in zip(weights, row, strict=True)) + bias)


@pytest.mark.parametrize("framework", ["xgboost", "jax"])
def test_shards_partition_the_rows(framework: str) -> None:
    rows = list(range(10))
    shards = [load(framework).shard(rows, index, 3) for index in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert load(framework).shard(rows, 0, 1) == rows


def test_jax_epoch_plan_gives_every_process_the_same_number_of_full_batches() -> None:
    plan = load("jax").epoch_plan
    assert plan(4096, 1, 128) == (128, 32)
    assert plan(1000, 3, 100) == (100, 3)  # shards of 334, 333, 333 rows: 3 full batches each
    assert plan(10, 4, 128) == (2, 1)  # batch shrinks to the smallest shard
    assert plan(3, 8, 16) == (1, 1)


def test_tensorflow_steps_and_data_order_per_epoch() -> None:
    module = load("tensorflow")
    assert module.steps_per_epoch(4096, 64) == 64
    assert module.steps_per_epoch(100, 64) == 1
    assert module.steps_per_epoch(10, 64) == 1
    seeds = [module.shuffle_seed(42, epoch) for epoch in range(1, 50)]
    assert len(set(seeds)) == len(seeds) and all(0 <= seed < 2**31 for seed in seeds)
    assert module.shuffle_seed(42, 3) == module.shuffle_seed(42, 3)
    assert 0 <= module.shuffle_seed(-5, 1) < 2**31


# --- launcher variables: what the operator injects for the examples' own manifests ---------------------------------


def operator_env(framework: str, kind: str, index: int) -> dict[str, str]:
    body = manifest(framework, kind)
    body["metadata"]["namespace"] = "ml"
    job = TrainingJob.from_body(body)
    return {entry["name"]: entry["value"] for entry in worker_env(job, index, attempt=0)}


@pytest.mark.parametrize(("framework", "kind"), FRAMEWORK_MANIFESTS)
def test_scripts_read_the_hyperparameters_file_the_operator_writes(framework: str, kind: str, tmp_path: Path) -> None:
    body = manifest(framework, kind)
    body["metadata"]["namespace"] = "ml"
    data = desired_config_data(TrainingJob.from_body(body))
    path = tmp_path / c.HYPERPARAMETERS_FILE
    path.write_text(data[c.HYPERPARAMETERS_FILE])
    module = load(framework)
    given = body["spec"]["hyperparameters"]
    assert set(given) <= set(module.DEFAULTS), "the manifest sets hyperparameters the script does not know"
    params = module.parse_hyperparameters(path)
    assert {key: params[key] for key in given} == given


@pytest.mark.parametrize(("framework", "kind"), FRAMEWORK_MANIFESTS)
def test_scripts_understand_the_launcher_env_of_their_manifests(framework: str, kind: str) -> None:
    module = load(framework)
    spec = manifest(framework, kind)["spec"]
    workers = spec["workers"]
    for index in range(workers):
        env = operator_env(framework, kind, index)
        if framework == "pytorch":
            # Without torchrun one process per pod; torchrun replaces RANK and WORLD_SIZE per process.
            settings = module.distributed_settings(env)
            assert (settings.rank, settings.world_size, settings.is_chief) == (index, workers, index == 0)
            assert settings.backend == spec["networking"]["backend"]
            assert env["PET_NPROC_PER_NODE"] == str(max(spec["gpuPerWorker"], 1))
            torchrun = {**env, "RANK": str(index * 2 + 1), "WORLD_SIZE": str(workers * 2), "LOCAL_RANK": "1"}
            assert module.distributed_settings(torchrun).local_rank == 1
        elif framework == "tensorflow":
            task = module.parse_tf_config(env["TF_CONFIG"])
            assert (task.task_type, task.index, task.num_workers, task.is_chief) == (
                "worker",
                index,
                workers,
                index == 0,
            )
            expected = {"gloo": "RING", "nccl": "NCCL"}[spec["networking"]["backend"]]
            assert module.communication_implementation(env["DISTRIBUTED_BACKEND"]) == expected
        elif framework == "xgboost":
            settings = module.collective_settings(env)
            assert (settings.num_workers, settings.task_index, settings.is_chief) == (workers, index, index == 0)
            assert (
                settings.tracker_host
                == f"{spec_name(framework, kind)}-worker-0.{spec_name(framework, kind)}-workers.ml.svc"
            )
            assert settings.tracker_port == spec.get("networking", {}).get("masterPort", c.DEFAULT_MASTER_PORT)
            args = settings.worker_args("10.0.0.7")
            assert args["dmlc_tracker_uri"] == "10.0.0.7"
            assert args["dmlc_task_id"] == str(index)
        else:
            process = module.jax_process(env)
            assert (process.num_processes, process.process_id, process.is_chief) == (workers, index, index == 0)
            assert process.coordinator_address == env["JAX_COORDINATOR_ADDRESS"]
            assert process.coordinator_address.endswith(f":{c.DEFAULT_MASTER_PORT}")
            assert process.backend == spec["networking"]["backend"]
        assert env["CHECKPOINT_INTERVAL"] == str(spec["checkpoint"]["interval"])
        assert env["CHECKPOINT_KEEP_LAST"] == str(spec["checkpoint"]["keepLast"])


def spec_name(framework: str, kind: str) -> str:
    return manifest(framework, kind)["metadata"]["name"]


def test_single_process_defaults_without_launcher_env() -> None:
    settings = load("pytorch").distributed_settings({})
    assert (settings.backend, settings.rank, settings.world_size, settings.distributed) == ("gloo", 0, 1, False)
    assert load("tensorflow").parse_tf_config(None).is_chief
    assert load("tensorflow").communication_implementation(None) == "AUTO"
    assert not load("xgboost").collective_settings({}).distributed
    assert not load("jax").jax_process({}).distributed


@pytest.mark.parametrize(
    ("framework", "env", "message"),
    [
        ("pytorch", {"DISTRIBUTED_BACKEND": "mpi"}, "DISTRIBUTED_BACKEND must be one of gloo, nccl"),
        ("pytorch", {"WORLD_SIZE": "2", "RANK": "2"}, "inconsistent RANK=2 WORLD_SIZE=2"),
        ("pytorch", {"WORLD_SIZE": "two"}, "WORLD_SIZE must be an integer"),
        ("xgboost", {"DMLC_NUM_WORKER": "2", "DMLC_TASK_ID": "0"}, "DMLC_TRACKER_URI and DMLC_TRACKER_PORT"),
        ("xgboost", {"DMLC_NUM_WORKER": "2", "DMLC_TASK_ID": "5"}, "DMLC_TASK_ID must be 0 to 1"),
        ("jax", {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}, "JAX_COORDINATOR_ADDRESS must be set"),
        ("jax", {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2"}, "inconsistent JAX_PROCESS_ID=2"),
    ],
)
def test_inconsistent_launcher_env_is_a_config_error(framework: str, env: dict[str, str], message: str) -> None:
    module = load(framework)
    parse = {
        "pytorch": module.__dict__.get("distributed_settings"),
        "xgboost": module.__dict__.get("collective_settings"),
        "jax": module.__dict__.get("jax_process"),
    }[framework]
    with pytest.raises(module.ConfigError, match=message):
        parse(env)


@pytest.mark.parametrize(
    ("tf_config", "expected"),
    [
        ('{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}}', ("worker", 1, 2, False)),
        (
            '{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}',
            ("chief", 0, 2, True),
        ),
        (
            '{"cluster": {"chief": ["c:1"], "worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}',
            ("worker", 0, 2, False),
        ),
    ],
)
def test_tf_config_chief(tf_config: str, expected: tuple[str, int, int, bool]) -> None:
    task = load("tensorflow").parse_tf_config(tf_config)
    assert (task.task_type, task.index, task.num_workers, task.is_chief) == expected


@pytest.mark.parametrize(
    "tf_config",
    [
        "{",
        "[]",
        '{"cluster": {"worker": ["a:1"]}}',
        '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
    ],
)
def test_invalid_tf_config_is_a_config_error(tf_config: str) -> None:
    module = load("tensorflow")
    with pytest.raises(module.ConfigError, match="TF_CONFIG"):
        module.parse_tf_config(tf_config)


def test_xgboost_resolves_the_tracker_host_and_gives_up_after_its_timeout() -> None:
    resolve = load("xgboost").resolve
    assert resolve("127.0.0.1", timeout=1) == "127.0.0.1"
    with pytest.raises(RuntimeError, match="cannot resolve the tracker host"):
        resolve("no-such-host.invalid", timeout=0, interval=0)


# --- the manifests ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_every_example_manifest_is_a_trainingjob(path: Path) -> None:
    documents = list(yaml.safe_load_all(path.read_text()))
    assert len(documents) == 1
    body = documents[0]
    assert body["apiVersion"] == c.API_VERSION
    assert body["kind"] == c.KIND
    assert len(body["metadata"]["name"]) <= c.MAX_JOB_NAME_LENGTH
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


# --- real training where the library is installed ------------------------------------------------------------------

TINY = {
    "pytorch": {"batchSize": 32, "hiddenSize": 16, "numSamples": 256, "numFeatures": 8, "numClasses": 3},
    "tensorflow": {"batchSize": 32, "hiddenSize": 16, "numSamples": 256, "numFeatures": 8, "numClasses": 3},
    "xgboost": {"roundsPerEpoch": 2, "maxDepth": 3, "numSamples": 256, "numFeatures": 8},
    "jax": {"batchSize": 32, "numSamples": 256, "numFeatures": 8},
}


def run_script(framework: str, tmp_path: Path, epochs: int, resume: bool) -> subprocess.CompletedProcess[str]:
    hyperparameters = tmp_path / "hyperparameters.json"
    hyperparameters.write_text(json.dumps({**TINY[framework], "epochs": epochs}))
    env = child_env(
        TRAININGJOB_HYPERPARAMETERS_FILE=str(hyperparameters),
        CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        CHECKPOINT_INTERVAL="1",
        CHECKPOINT_KEEP_LAST="2",
        RESUME_FROM_CHECKPOINT="true" if resume else "false",
        DISTRIBUTED_BACKEND="gloo",
        CUDA_VISIBLE_DEVICES="",
        JAX_PLATFORMS="cpu",
    )
    return subprocess.run(
        [sys.executable, str(BY_FRAMEWORK[framework].path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_real_training_for_2_epochs_then_a_restart_resumes_at_epoch_3(framework: str, tmp_path: Path) -> None:
    pytest.importorskip(BY_FRAMEWORK[framework].library)
    first = run_script(framework, tmp_path, epochs=2, resume=False)
    assert first.returncode == 0, first.stderr
    assert "epoch 1/2" in first.stderr and "epoch 2/2" in first.stderr
    assert [info.epoch for info in sdk.list_checkpoints(tmp_path / "checkpoints")] == [1, 2]

    second = run_script(framework, tmp_path, epochs=3, resume=True)
    assert second.returncode == 0, second.stderr
    assert "resuming from" in second.stderr and "at epoch 3" in second.stderr
    assert "epoch 1/3" not in second.stderr and "epoch 2/3" not in second.stderr
    assert "epoch 3/3" in second.stderr
    assert [info.epoch for info in sdk.list_checkpoints(tmp_path / "checkpoints")] == [2, 3]
