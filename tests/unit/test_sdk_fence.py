"""trainingjob.sdk's fence: a worker replaced by a newer attempt (its node lost behind a partition, its pod forced
away, the worker restarted elsewhere) may train on unseen, but may not save into, or prune, the checkpoints its
replacement resumes from. Checkpoints in S3 are fenced the same way: tests/integration/test_s3_checkpoints.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainingjob import sdk
from trainingjob.sdk import SupersededAttempt

SDK_ENV = ["CHECKPOINT_DIR", "CHECKPOINT_KEEP_LAST", "CHECKPOINT_URI", "RESUME_FROM_CHECKPOINT", "TRAININGJOB_ROLE"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [*SDK_ENV, "TRAININGJOB_RESTART_COUNT", "TRAININGJOB_PROGRESS_URL", "TRAININGJOB_WORKER_INDEX"]:
        monkeypatch.delenv(name, raising=False)
    yield


def save(epoch: int, data: bytes = b"w", keep_last: int | None = None) -> Path:
    return sdk.save_checkpoint(lambda path: Path(path).write_bytes(data), epoch, keep_last=keep_last, report=False)


def as_attempt(monkeypatch: pytest.MonkeyPatch, attempt: int) -> None:
    monkeypatch.setenv("TRAININGJOB_RESTART_COUNT", str(attempt))


def test_a_replaced_attempt_can_neither_save_nor_prune_once_the_new_one_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    as_attempt(monkeypatch, 0)
    save(1), save(2)
    assert (tmp_path / ".attempt-worker-0").read_text() == "0\n", "the first save fences the store for its attempt"

    # The gang restarted on another node: attempt 1 resumes, and so fences attempt 0 out.
    as_attempt(monkeypatch, 1)
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert sdk.resume_point() == (3, tmp_path / "ckpt-00000002")
    assert (tmp_path / ".attempt-worker-0").read_text() == "1\n"

    # The old gang trains on, unseen: its next save is refused before anything lands or is pruned.
    as_attempt(monkeypatch, 0)
    with pytest.raises(
        SupersededAttempt, match=r"attempt 0 of this worker was superseded by attempt 1 \(\.attempt-worker-0 "
    ):
        save(3, b"stale", keep_last=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".attempt-worker-0", "ckpt-00000001", "ckpt-00000002"]

    as_attempt(monkeypatch, 1)
    assert save(3, b"fresh", keep_last=1).read_bytes() == b"fresh"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".attempt-worker-0", "ckpt-00000003"]


def test_a_newer_attempts_first_save_fences_too_and_workers_of_one_attempt_share_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a resume (no checkpoint asked for), the newer attempt's first save is what fences; any worker of the
    fencing attempt (the same number) keeps saving; a fence that is not a number is rewritten."""
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    as_attempt(monkeypatch, 2)
    save(5)
    save(6)  # another worker of attempt 2
    as_attempt(monkeypatch, 1)
    with pytest.raises(SupersededAttempt):
        save(7)
    assert not (tmp_path / "ckpt-00000007").exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == [], "no temporary left behind"
    (tmp_path / ".attempt-worker-0").write_text("garbled")
    save(7)
    assert (tmp_path / ".attempt-worker-0").read_text() == "1\n"


def test_outside_a_trainingjob_nothing_is_fenced_or_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    save(1)
    assert sdk.resume_point() == (2, tmp_path / "ckpt-00000001")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-00000001"]


def test_a_superseded_script_ends_with_the_reason_and_leaves_no_checkpoint(tmp_path: Path) -> None:
    """What the stale process on a partitioned node does: its save raises, uncaught, so the script ends, saying why."""
    (tmp_path / ".attempt-worker-0").write_text("4\n")
    (tmp_path / ".attempt-worker-1").write_text("9\n")  # another worker's fence: not this one's business
    script = (
        "from pathlib import Path\nfrom trainingjob import sdk\n"
        "sdk.save_checkpoint(lambda p: Path(p).write_text('stale'), 9, report=False)\nprint('saved')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "CHECKPOINT_DIR": str(tmp_path), "TRAININGJOB_RESTART_COUNT": "3"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "saved" not in done.stdout, done
    assert "SupersededAttempt: attempt 3 of this worker was superseded by attempt 4" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [".attempt-worker-0", ".attempt-worker-1"]


def test_each_worker_has_its_own_fence_so_a_restart_of_one_worker_fences_only_its_old_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """restartStrategy Worker: only the failed worker gets a new attempt number; the chief, still the job's at the
    old number, keeps saving. Roles have fences of their own too (TensorFlow's chief 0 and worker 0 are two)."""
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path))
    as_attempt(monkeypatch, 0)
    save(1)  # the chief, worker 0
    monkeypatch.setenv("TRAININGJOB_WORKER_INDEX", "1")
    as_attempt(monkeypatch, 1)
    monkeypatch.setenv("RESUME_FROM_CHECKPOINT", "true")
    assert sdk.resume_point() == (2, tmp_path / "ckpt-00000001")  # worker 1, restarted alone, resumes
    monkeypatch.setenv("TRAININGJOB_WORKER_INDEX", "0")
    as_attempt(monkeypatch, 0)
    save(2)  # the chief is not superseded: its own fence says 0
    monkeypatch.setenv("TRAININGJOB_ROLE", "chief")
    as_attempt(monkeypatch, 3)
    save(3)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert names == [".attempt-chief-0", ".attempt-worker-0", ".attempt-worker-1"]
    assert [(tmp_path / name).read_text() for name in names] == ["3\n", "0\n", "1\n"]
