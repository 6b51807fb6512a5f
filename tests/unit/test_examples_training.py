"""The example scripts' training logic, the same in all four frameworks: the resume point from CHECKPOINT_DIR and
RESUME_FROM_CHECKPOINT, the checkpoint cadence, a run of 2 epochs then a restart that resumes at epoch 3 (the epoch
loop with the training left out), each script's own checkpoint code with stand-ins for the model, and the synthetic
data and its sharding.

Where the ML library is installed, each script also trains 2 epochs for real and a restarted run resumes at epoch 3
in the example's runtime (`make runtimes`, which `make test` runs first: torch, tensorflow, xgboost and jax are too
big for the project's own venv).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.prerequisites import missing_prerequisite
from tests.unit import examples_support
from tests.unit.examples_support import BY_FRAMEWORK, FRAMEWORKS, child_env, load, stop_when_logged
from trainingjob import sdk

clean_env = examples_support.clean_env  # autouse: no launcher variable or default reporter leaks into a test

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


# --- real training where the library is installed ------------------------------------------------------------------

TINY = {
    "pytorch": {"batchSize": 32, "hiddenSize": 16, "numSamples": 256, "numFeatures": 8, "numClasses": 3},
    "tensorflow": {"batchSize": 32, "hiddenSize": 16, "numSamples": 256, "numFeatures": 8, "numClasses": 3},
    "xgboost": {"roundsPerEpoch": 2, "maxDepth": 3, "numSamples": 256, "numFeatures": 8},
    "jax": {"batchSize": 32, "numSamples": 256, "numFeatures": 8},
}


def training_python(framework: str) -> str:
    """The example's runtime venv (built by `make runtimes`, which `make test` does first), else this interpreter
    if it has the framework; a missing prerequisite when neither can run it."""
    runtime = BY_FRAMEWORK[framework].runtime_python()
    if runtime is not None:
        return str(runtime)
    library = BY_FRAMEWORK[framework].library
    if importlib.util.find_spec(library) is None:
        missing_prerequisite(f"the {framework} example's runtime is not built (make runtimes)")
    return sys.executable


def script_env(framework: str, tmp_path: Path, epochs: int, resume: bool) -> dict[str, str]:
    hyperparameters = tmp_path / "hyperparameters.json"
    hyperparameters.write_text(json.dumps({**TINY[framework], "epochs": epochs}))
    return child_env(
        TRAININGJOB_HYPERPARAMETERS_FILE=str(hyperparameters),
        CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        CHECKPOINT_INTERVAL="1",
        CHECKPOINT_KEEP_LAST="2",
        RESUME_FROM_CHECKPOINT="true" if resume else "false",
        DISTRIBUTED_BACKEND="gloo",
        CUDA_VISIBLE_DEVICES="",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=str(examples_support.REPO / "src"),  # the SDK, as the image ships it beside the script
        OMP_NUM_THREADS="1",
    )


def run_script(framework: str, tmp_path: Path, epochs: int, resume: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [training_python(framework), str(BY_FRAMEWORK[framework].path)],
        env=script_env(framework, tmp_path, epochs, resume),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_real_training_for_2_epochs_then_a_restart_resumes_at_epoch_3(framework: str, tmp_path: Path) -> None:
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


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_real_training_stopped_by_sigterm_saves_a_checkpoint_that_the_restart_resumes_from(
    framework: str, tmp_path: Path
) -> None:
    """sdk.on_stop in each example: SIGTERM after epoch 2 of 1000 saves the last whole epoch and exits 143 (a stop,
    not a success), and the next attempt resumes after that checkpoint."""
    command = [training_python(framework), str(BY_FRAMEWORK[framework].path)]
    code, rest = stop_when_logged(command, script_env(framework, tmp_path, 1000, False), "epoch 2/1000")
    assert code == 143, rest
    saved = sdk.list_checkpoints(tmp_path / "checkpoints")[-1]
    assert saved.epoch >= 2 and f"stopped with checkpoint {saved.path}" in rest, rest

    resumed = run_script(framework, tmp_path, epochs=saved.epoch + 1, resume=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"at epoch {saved.epoch + 1}" in resumed.stderr and "resuming from" in resumed.stderr
