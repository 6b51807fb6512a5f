"""Fencing a superseded attempt out of the job's checkpoints.

Why: when a node is lost behind a partition, the operator force-deletes its workers and restarts them elsewhere,
but the old processes may train on, unseen, and keep saving into the same checkpoint store under the same names
(``ckpt-<epoch>``), replacing or pruning what their replacements saved. Kubernetes cannot stop a process on a
machine it cannot reach; the storage both share can. Every attempt of a job has a number
(TRAININGJOB_RESTART_COUNT, the job's ``status.attempt``, which never decreases), and a worker that starts writes
its attempt into its own fence in the checkpoint store — ``.attempt-<role>-<index>`` in CHECKPOINT_DIR, or that
object under the ``s3://`` prefix. A process whose attempt is older than its worker's fence has been replaced: it
may not save (``SupersededAttempt`` is raised before anything is renamed into place, uploaded or pruned), which
ends the stale script. One fence per worker, not per job: with ``restartStrategy: Worker`` only the failed worker
gets the new attempt number, and the others, still the job's, must keep saving.

Limits: check then act, without a lock (none works across machines on every shared file system, nor in S3): a save
that passed its check just before the replacement wrote the fence still lands — one checkpoint at most, whole (it
is renamed into place) — and the new worker replaces it with its own of that epoch. Outside a TrainingJob (no
TRAININGJOB_RESTART_COUNT) nothing is fenced and no fence is written.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _env

log = logging.getLogger("trainingjob.sdk")

FENCE_PREFIX = ".attempt-"  # a dot name: never taken for a checkpoint (see checkpoint.py's naming scheme)
_MOST = 64  # bytes of the fence read: a number, whatever else shared storage may hold there


class SupersededAttempt(RuntimeError):
    """A newer attempt of this worker fenced the checkpoint store: this worker's pod was replaced, it must not save."""


def fence_name() -> str:
    """This worker's fence: ``.attempt-<role>-<index>`` (TRAININGJOB_ROLE, default worker; TRAININGJOB_WORKER_INDEX)."""
    role = re.sub(r"[^a-z0-9]", "", os.environ.get(_env.ROLE, "").strip().lower())[:32] or "worker"
    return f"{FENCE_PREFIX}{role}-{_env.rank()}"


def own_attempt() -> int | None:
    """This worker's attempt (TRAININGJOB_RESTART_COUNT), or None outside a TrainingJob."""
    if not os.environ.get(_env.RESTART_COUNT, "").strip():
        return None
    return _env.restart_count()


def claim_directory(directory: Path) -> None:
    """Raise SupersededAttempt if a newer attempt fenced `directory`; record this attempt there if it is newer."""

    def read(name: str) -> bytes | None:
        try:
            with (directory / name).open("rb") as file:
                return file.read(_MOST)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write(name: str, body: bytes) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        temp = directory / f"{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        temp.write_bytes(body)
        os.replace(temp, directory / name)

    _claim(read, write, str(directory))


def claim_store(s3: Any, store: Any) -> None:
    """The same for checkpoints in S3: the fence is that object under the store's prefix."""

    def read(name: str) -> bytes | None:
        try:
            return s3.get_object(Bucket=store.bucket, Key=store.key(name))["Body"].read(_MOST)
        except s3.exceptions.NoSuchKey:
            return None

    def write(name: str, body: bytes) -> None:
        s3.put_object(Bucket=store.bucket, Key=store.key(name), Body=body)

    _claim(read, write, store.uri())


def _claim(read: Callable[[str], bytes | None], write: Callable[[str, bytes], None], where: str) -> None:
    """Read this worker's fence, refuse if a newer attempt wrote it, write this attempt if it is newer: the one
    sequence both stores follow (only how a fence is read and written differs)."""
    attempt = own_attempt()
    if attempt is None:
        return
    name = fence_name()
    body = read(name)
    current = None if body is None else _parse(body.decode(errors="replace"))
    _judge(attempt, current, where)
    if current is None or current < attempt:
        write(name, f"{attempt}\n".encode())


def _judge(attempt: int, current: int | None, where: str) -> None:
    if current is not None and current > attempt:
        message = (
            f"attempt {attempt} of this worker was superseded by attempt {current} ({fence_name()} in {where}): its "
            "pod was replaced, so it may not save checkpoints any more; stopping"
        )
        log.error("%s", message)
        raise SupersededAttempt(message)


def _parse(text: str) -> int | None:
    """The fence's attempt; None for a fence that is not a number (then the next claim rewrites it)."""
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None
