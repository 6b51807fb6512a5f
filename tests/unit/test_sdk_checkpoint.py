"""trainingjob.sdk checkpoint helpers: atomic save, pruning, the naming scheme, resume logic and identity helpers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainingjob import sdk
from trainingjob.sdk import ProgressReporter

SDK_ENV = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_INTERVAL",
    "CHECKPOINT_KEEP_LAST",
    "RESUME_FROM_CHECKPOINT",
    "TRAININGJOB_PROGRESS_URL",
    "TRAININGJOB_WORKER_INDEX",
    "TRAININGJOB_WORLD_SIZE",
    "TRAININGJOB_RESTART_COUNT",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in SDK_ENV:
        monkeypatch.delenv(name, raising=False)
    sdk.set_default_reporter(None)
    yield
    sdk.set_default_reporter(None)


def write_bytes(data: bytes) -> Any:
    return lambda path: Path(path).write_bytes(data)


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_save_writes_atomically_under_the_scheme_name(tmp_path: Path) -> None:
    path = sdk.save_checkpoint(write_bytes(b"weights-3"), epoch=3, directory=tmp_path)
    assert path == tmp_path / "ckpt-00000003"
    assert path.read_bytes() == b"weights-3"
    stepped = sdk.save_checkpoint(write_bytes(b"w"), epoch=3, step=1200, directory=tmp_path, suffix=".pt")
    assert stepped.name == "ckpt-00000003-000000001200.pt"
    assert entries(tmp_path) == ["ckpt-00000003", "ckpt-00000003-000000001200.pt"]  # no temporaries left


def test_save_accepts_a_directory_checkpoint_and_replaces_one_of_the_same_epoch(tmp_path: Path) -> None:
    def write_dir(version: str) -> Any:
        def write(path: Path) -> None:
            path.mkdir()
            (path / "model.bin").write_text(version)
            (path / "optim").mkdir()
            (path / "optim" / "state.json").write_text(json.dumps({"v": version}))

        return write

    first = sdk.save_checkpoint(write_dir("a"), epoch=1, directory=tmp_path)
    again = sdk.save_checkpoint(write_dir("b"), epoch=1, directory=tmp_path)  # e.g. re-done after a restart
    assert first == again
    assert (again / "model.bin").read_text() == "b"
    assert entries(tmp_path) == ["ckpt-00000001"]


def test_failing_write_leaves_no_checkpoint_and_no_temporary(tmp_path: Path) -> None:
    sdk.save_checkpoint(write_bytes(b"good"), epoch=1, directory=tmp_path)

    def half_written(path: Path) -> None:
        path.write_bytes(b"partial")
        raise OSError("disk full")

    def half_written_dir(path: Path) -> None:
        path.mkdir()
        (path / "shard-0").write_bytes(b"partial")
        raise KeyboardInterrupt  # even an interrupt cleans up

    with pytest.raises(OSError, match="disk full"):
        sdk.save_checkpoint(half_written, epoch=2, directory=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        sdk.save_checkpoint(half_written_dir, epoch=2, directory=tmp_path)
    with pytest.raises(FileNotFoundError, match="did not create"):
        sdk.save_checkpoint(lambda path: None, epoch=2, directory=tmp_path)
    assert entries(tmp_path) == ["ckpt-00000001"]
    assert sdk.latest_checkpoint(tmp_path) == tmp_path / "ckpt-00000001"


def test_invalid_arguments_raise_before_anything_is_written(tmp_path: Path) -> None:
    for kwargs in ({"epoch": -1}, {"epoch": 1, "step": -5}, {"epoch": 1, "keep_last": 0}, {"epoch": 1, "suffix": "/x"}):
        with pytest.raises(ValueError):
            sdk.save_checkpoint(write_bytes(b"x"), directory=tmp_path / "d", **kwargs)
    assert not (tmp_path / "d").exists()


def test_pruning_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for epoch in range(1, 6):
        sdk.save_checkpoint(write_bytes(b"x"), epoch=epoch, keep_last=2, directory=tmp_path)
    assert entries(tmp_path) == ["ckpt-00000004", "ckpt-00000005"]

    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "3")
    for epoch in range(6, 9):
        sdk.save_checkpoint(write_bytes(b"x"), epoch=epoch, directory=tmp_path)
    assert entries(tmp_path) == ["ckpt-00000006", "ckpt-00000007", "ckpt-00000008"]

    # the checkpoint just saved is never pruned, even when it is older than the ones kept
    sdk.save_checkpoint(write_bytes(b"x"), epoch=2, keep_last=1, directory=tmp_path)
    assert entries(tmp_path) == ["ckpt-00000002", "ckpt-00000008"]


def test_without_keep_last_everything_is_kept(tmp_path: Path) -> None:
    for epoch in range(4):
        sdk.save_checkpoint(write_bytes(b"x"), epoch=epoch, directory=tmp_path)
    assert len(entries(tmp_path)) == 4
    assert sdk.prune_checkpoints(directory=tmp_path) == []


def test_latest_checkpoint_orders_by_epoch_then_step_and_ignores_the_rest(tmp_path: Path) -> None:
    assert sdk.latest_checkpoint(tmp_path / "missing") is None
    for name in [
        "ckpt-00000002",
        "ckpt-00000010-000000000500",
        "ckpt-00000009-000000099999",
        ".ckpt-00000099.tmp-12-abcd",  # an interrupted save
        "notes.txt",
        "ckpt-abc",
        "ckpt-3",
    ]:
        (tmp_path / name).write_text("x")
    assert sdk.latest_checkpoint(tmp_path) == tmp_path / "ckpt-00000010-000000000500"
    (tmp_path / "ckpt-00000010").mkdir()  # the end of epoch 10 comes after its steps
    assert sdk.latest_checkpoint(tmp_path) == tmp_path / "ckpt-00000010"
    (tmp_path / "ckpt-100000000").write_text("x")  # more digits than the padding still sorts numerically
    assert sdk.latest_checkpoint(tmp_path) == tmp_path / "ckpt-100000000"
    assert [(i.epoch, i.step) for i in sdk.list_checkpoints(tmp_path)] == [
        (2, None),
        (9, 99999),
        (10, 500),
        (10, None),
        (100000000, None),
    ]
    assert sdk.parse_checkpoint("/c/ckpt-00000004-000000000007.pt") == sdk.CheckpointInfo(
        Path("/c/ckpt-00000004-000000000007.pt"), 4, 7
    )


def test_should_resume_needs_the_flag_and_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    assert sdk.should_resume() is False
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert sdk.should_resume() is False  # restarted, but nothing saved yet
    sdk.save_checkpoint(write_bytes(b"x"), epoch=0)  # CHECKPOINT_DIR is the default directory
    assert sdk.should_resume() is True
    assert sdk.latest_checkpoint() == tmp_path / "ckpt-00000000"
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "false")
    assert sdk.should_resume() is False


def test_resume_from_another_run_is_explicit_and_own_checkpoints_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RESUME_FROM_CHECKPOINT may name another run's directory or checkpoint (spec.checkpoint.resumeFrom): it is
    used until this run has checkpoints of its own, which are its later progress."""
    earlier, own = tmp_path / "run-1", tmp_path / "run-2"
    monkeypatch.setenv("CHECKPOINT_DIR", str(own))
    sdk.save_checkpoint(write_bytes(b"old"), epoch=57, directory=earlier, report=False)
    sdk.save_checkpoint(write_bytes(b"old"), epoch=56, directory=earlier, report=False)
    assert sdk.resume_checkpoint() is None  # nothing asked for: a new run starts from scratch
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert sdk.resume_checkpoint() is None  # "true" means this run's own checkpoints, and it has none
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", str(earlier))
    assert sdk.resume_checkpoint() == earlier / "ckpt-00000057"
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", str(earlier / "ckpt-00000056"))
    assert sdk.resume_checkpoint() == earlier / "ckpt-00000056"
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", str(earlier / "ckpt-00000099"))
    assert sdk.resume_checkpoint() is None and sdk.should_resume() is False  # named, but not there
    sdk.save_checkpoint(write_bytes(b"new"), epoch=58, keep_last=1, report=False)
    assert sdk.resume_checkpoint() == own / "ckpt-00000058"
    assert len(sdk.list_checkpoints(earlier)) == 2  # pruning this run never touches another's


def test_environment_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sdk.checkpoint_dir() == Path("checkpoints")
    assert (sdk.checkpoint_interval(), sdk.checkpoint_keep_last()) == (1, None)
    assert (sdk.rank(), sdk.world_size(), sdk.is_chief(), sdk.restart_count(), sdk.in_job()) == (0, 1, True, 0, False)

    monkeypatch.setenv("CHECKPOINT_DIR", "/checkpoints")
    monkeypatch.setenv("CHECKPOINT_INTERVAL", "5")
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "2")
    monkeypatch.setenv("TRAININGJOB_WORKER_INDEX", "3")
    monkeypatch.setenv("TRAININGJOB_WORLD_SIZE", "4")
    monkeypatch.setenv("TRAININGJOB_RESTART_COUNT", "2")
    assert sdk.checkpoint_dir() == Path("/checkpoints")
    assert (sdk.checkpoint_interval(), sdk.checkpoint_keep_last()) == (5, 2)
    assert (sdk.rank(), sdk.world_size(), sdk.is_chief(), sdk.restart_count()) == (3, 4, False, 2)

    monkeypatch.setenv("CHECKPOINT_INTERVAL", "0")
    monkeypatch.setenv("CHECKPOINT_KEEP_LAST", "many")
    monkeypatch.setenv("TRAININGJOB_WORLD_SIZE", "")
    assert (sdk.checkpoint_interval(), sdk.checkpoint_keep_last(), sdk.world_size()) == (1, None, 1)


class RecordingOpener:
    """Stands in for urllib's opener: records the JSON bodies and answers 202."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def open(self, request: Any, data: bytes | None = None, timeout: float = 0) -> Any:
        self.bodies.append(json.loads(request.data))
        return self

    def __enter__(self) -> RecordingOpener:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self) -> bytes:
        return b""


def test_save_reports_the_checkpoint_even_inside_the_throttle_window(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    opener = RecordingOpener()
    env = {
        "TRAININGJOB_PROGRESS_URL": "https://operator.example:8443",
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token),
        "TRAININGJOB_NAME": "j",
        "TRAININGJOB_NAMESPACE": "ns",
        "TRAININGJOB_WORKER_INDEX": "0",
    }
    reporter = ProgressReporter(env=env, opener=opener, clock=lambda: 50.0)
    sdk.set_default_reporter(reporter)
    assert sdk.report_progress(epoch=4, loss=1.0) is True
    assert reporter.wait()
    path = sdk.save_checkpoint(write_bytes(b"x"), epoch=4, step=800, directory=tmp_path / "ckpts")
    assert sdk.report_progress(epoch=4, loss=0.9) is False  # throttled, as usual
    assert reporter.wait()
    assert opener.bodies == [
        {"worker": 0, "epoch": 4, "metrics": {"loss": 1.0}},
        {"worker": 0, "checkpoint": {"epoch": 4, "step": 800, "path": str(path)}},
    ]


def test_a_checkpoint_report_carries_the_epoch_report_the_throttle_held_back(tmp_path: Path) -> None:
    """A fast loop reports an epoch (throttled) and then saves its checkpoint (sent at once): the checkpoint's
    report must bring that epoch along. It used to drop it, and a four-epoch job Succeeded at 25 %."""
    token = tmp_path / "token"
    token.write_text("t")
    opener = RecordingOpener()
    env = {
        "TRAININGJOB_PROGRESS_URL": "https://operator.example:8443",
        "TRAININGJOB_PROGRESS_TOKEN_FILE": str(token),
        "TRAININGJOB_NAME": "j",
        "TRAININGJOB_NAMESPACE": "ns",
        "TRAININGJOB_WORKER_INDEX": "0",
    }
    reporter = ProgressReporter(env=env, opener=opener, clock=lambda: 50.0)
    sdk.set_default_reporter(reporter)
    for epoch in range(1, 5):
        sdk.report_progress(epoch=epoch, total_epochs=4, loss=1.0 / epoch)
        assert reporter.wait()  # the sender is idle between epochs: nothing merges in its queue of one
        sdk.save_checkpoint(write_bytes(b"x"), epoch=epoch, directory=tmp_path / "ckpts")
        assert reporter.wait()
    last = opener.bodies[-1]
    assert (last["epoch"], last["totalEpochs"], last["metrics"], last["checkpoint"]["epoch"]) == (
        4,
        4,
        {"loss": 0.25},
        4,
    )
    assert reporter.flush() is True and opener.bodies[-1] is last  # nothing was left behind to send
