"""Checkpoints on the job's checkpoint volume: where they live, which is newest, and saving them safely.

Why: a worker can be killed at any moment (preemption, OOM, a gang restart), and the next attempt resumes from
whatever it finds in CHECKPOINT_DIR (with RESUME_FROM_CHECKPOINT=true). So a checkpoint must be complete or absent,
never half-written: ``save_checkpoint`` lets the caller write into a temporary name in the same directory, fsyncs it,
and only then renames it into place (``os.replace`` is atomic within one file system).

CHECKPOINT_DIR is this run's own directory (``<checkpoint.dir>/<job uid>`` inside a TrainingJob), so a job submitted
again under the same name on the same volume neither resumes from nor prunes the previous run's checkpoints;
resuming from another run is an explicit request (spec.checkpoint.resumeFrom, see ``resume_checkpoint``).

Naming scheme — the only thing ``latest_checkpoint`` trusts (not modification times, which a copied or restored
volume does not keep):

- ``ckpt-<epoch:08d>`` for a checkpoint at the end of an epoch, ``ckpt-<epoch:08d>-<step:012d>`` for one taken at a
  step inside it, optionally followed by a suffix such as ``.pt``; a file or a directory, as ``write_fn`` makes it.
- Order is numeric by (epoch, step), and an epoch-only checkpoint counts as the end of that epoch, after all of its
  steps. ``epoch`` is the epoch the checkpoint completes (resume at epoch + 1).
- Temporary names start with a dot (``.ckpt-….tmp-…``), so a save interrupted by a crash is never mistaken for a
  checkpoint; anything else in the directory is ignored too.

With an ``s3://`` CHECKPOINT_URI (storage type s3) the bucket is the store and CHECKPOINT_DIR local scratch:
``save_checkpoint`` also uploads (complete or absent there too, _s3.py), prunes the bucket and reports the URI;
``latest_checkpoint()`` downloads the bucket's newest into CHECKPOINT_DIR once. Only without a `directory` argument.
A stop's report (sdk.on_stop) names the URI too (``_s3.location``).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from . import _env, _fence, _s3, _safepoint
from ._body import as_count
from ._durable import fsync, fsync_tree
from .progress import get_reporter

log = logging.getLogger("trainingjob.sdk")

DEFAULT_DIR = "checkpoints"  # relative to the working directory, outside a TrainingJob
_NAME = re.compile(r"^ckpt-(\d{8,})(?:-(\d{12,}))?(?:\.[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_SUFFIX = re.compile(r"^(?:\.[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class CheckpointInfo(NamedTuple):
    path: Path
    epoch: int
    step: int | None

    @property
    def order(self) -> tuple[int, float]:
        """Sort key: by epoch, then step; an epoch-only checkpoint ends its epoch."""
        return (self.epoch, float("inf") if self.step is None else self.step)


def checkpoint_dir() -> Path:
    """CHECKPOINT_DIR (the mounted checkpoint volume), or ./checkpoints when it is unset (outside a TrainingJob)."""
    return Path(os.environ.get(_env.CHECKPOINT_DIR, "").strip() or DEFAULT_DIR)


def checkpoint_interval() -> int:
    """Save a checkpoint every this many epochs (CHECKPOINT_INTERVAL, at least 1; 1 when unset)."""
    value = _env.env_int(_env.CHECKPOINT_INTERVAL, 1)
    return value if value is not None and value >= 1 else 1


def checkpoint_keep_last() -> int | None:
    """How many of the newest checkpoints to keep (CHECKPOINT_KEEP_LAST); None: keep all."""
    value = _env.env_int(_env.CHECKPOINT_KEEP_LAST, None)
    return value if value is not None and value >= 1 else None


def checkpoint_name(epoch: int, step: int | None = None, suffix: str = "") -> str:
    """The file or directory name of a checkpoint, e.g. ``ckpt-00000003`` or ``ckpt-00000003-000000001200.pt``."""
    if not _SUFFIX.match(suffix):
        raise ValueError(f"checkpoint suffix must look like '.pt', got {suffix!r}")
    name = f"ckpt-{as_count(epoch):08d}"
    if step is not None:
        name += f"-{as_count(step):012d}"
    return name + suffix


def parse_checkpoint(path: str | os.PathLike[str]) -> CheckpointInfo | None:
    """Epoch and step from a checkpoint's name, or None if the name is not one of ours."""
    path = Path(path)
    match = _NAME.match(path.name)
    if match is None:
        return None
    return CheckpointInfo(path, int(match[1]), None if match[2] is None else int(match[2]))


def list_checkpoints(directory: str | os.PathLike[str] | None = None) -> list[CheckpointInfo]:
    """The complete checkpoints in `directory` (default: checkpoint_dir()), oldest first; [] if it doesn't exist."""
    directory = checkpoint_dir() if directory is None else Path(directory)
    try:
        entries = list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [info for entry in entries if (info := parse_checkpoint(entry)) is not None]
    return sorted(found, key=lambda info: (info.order, info.path.name))


def checkpoint_store() -> _s3.S3Location | None:
    """Where the job keeps its checkpoints when that is S3 (CHECKPOINT_URI ``s3://bucket/prefix``), else None."""
    uri = os.environ.get(_env.CHECKPOINT_URI, "").strip()
    return _s3.S3Location.parse(uri) if _s3.is_s3(uri) else None


def latest_checkpoint(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The newest complete checkpoint by the naming scheme, or None. With checkpoints in S3 (and no `directory`),
    the newest one in the bucket, downloaded into CHECKPOINT_DIR unless it is there already."""
    store = checkpoint_store() if directory is None else None
    if store is not None:
        return _fetch_latest(store)
    found = list_checkpoints(directory)
    return found[-1].path if found else None


def save_checkpoint(
    write_fn: Callable[[Path], object],
    epoch: int,
    step: int | None = None,
    keep_last: int | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    suffix: str = "",
    report: bool = True,
) -> Path:
    """Save a checkpoint atomically, prune old ones, report it; the final path.

    `write_fn(temp_path)` writes the checkpoint as a file or a directory at `temp_path` (e.g.
    ``lambda p: torch.save(state, p)``). Then it is fsynced and renamed to its final name; if `write_fn` raises,
    the temporary is removed and the exception propagates, and no checkpoint (not even a partial one) appears.
    Afterwards all but the newest `keep_last` checkpoints (default CHECKPOINT_KEEP_LAST, else keep all) are
    removed — never the one just saved — and, with `report`, the checkpoint is reported to the operator.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    store = checkpoint_store() if directory is None else None
    directory = checkpoint_dir() if directory is None else Path(directory)
    final = directory / checkpoint_name(epoch, step, suffix)
    directory.mkdir(parents=True, exist_ok=True)
    temp = directory / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        write_fn(temp)
        if not os.path.lexists(temp):
            raise FileNotFoundError(f"write_fn did not create the checkpoint at {temp}")
        fsync_tree(temp)
        claim_checkpoints(None if store is not None else directory)  # a superseded attempt stops here
        _replace(temp, final)
    except BaseException:
        _remove(temp)
        raise
    fsync(directory, is_dir=True)
    prune_checkpoints(keep_last, directory=directory, protect=final)
    reported = _upload(store, final, keep_last) if store is not None else final
    if report:
        get_reporter().report_checkpoint(reported, epoch=epoch, step=step)
    _safepoint.reached(final)  # a stop requested by SIGTERM (sdk.on_stop) ends the process here, with this one
    return final


def claim_checkpoints(directory: str | os.PathLike[str] | None = None) -> None:
    """Fence older attempts of this job out of its checkpoints, or raise SupersededAttempt if a newer one fenced
    this one out (see _fence.py: a gang restarted off a lost node must not have its checkpoints replaced or pruned
    by the old gang training on unseen). Called by every save and by a resuming attempt; nothing outside a job."""
    if _fence.own_attempt() is None:
        return
    store = checkpoint_store() if directory is None else None
    if store is not None:
        _fence.claim_store(_s3.client(), store)
    else:
        _fence.claim_directory(checkpoint_dir() if directory is None else Path(directory))


def prune_checkpoints(
    keep_last: int | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    protect: Path | None = None,
) -> list[Path]:
    """Remove all but the newest `keep_last` checkpoints (default CHECKPOINT_KEEP_LAST; None: keep all).

    Returns what was removed. Failures are logged, not raised: the new checkpoint is already safe.
    """
    keep = checkpoint_keep_last() if keep_last is None else keep_last
    if keep is None:
        return []
    found = list_checkpoints(directory)
    removed = []
    for info in found[: max(0, len(found) - keep)]:
        if protect is not None and info.path == protect:
            continue
        try:
            _remove(info.path, strict=True)
        except OSError as error:
            log.warning("cannot remove old checkpoint %s: %s", info.path, error)
            continue
        removed.append(info.path)
    return removed


def _upload(store: _s3.S3Location, local: Path, keep_last: int | None) -> str:
    """Upload a saved checkpoint to the job's S3 store, then prune the store; the checkpoint's URI."""
    s3 = _s3.client()
    uri = _s3.upload(s3, local, store, local.name)
    _s3.note_upload(local, uri)
    keep = checkpoint_keep_last() if keep_last is None else keep_last
    if keep is not None:
        ordered, is_directory = _stored(s3, store)
        for name in ordered[: max(0, len(ordered) - keep)]:
            if name != local.name:
                try:
                    _s3.delete(s3, store, name, is_directory[name])
                except Exception as error:  # the new checkpoint is already safe: log, as prune_checkpoints does
                    log.warning("cannot remove old checkpoint %s: %s", store.uri(name), error)
    return uri


def _stored(s3: object, store: _s3.S3Location) -> tuple[list[str], dict[str, bool]]:
    """The complete checkpoints in the store by name, oldest first, and which of them are directories."""
    is_directory = _s3.complete_names(s3, store)
    found = [info for name in is_directory if (info := parse_checkpoint(name)) is not None]
    return [info.path.name for info in sorted(found, key=lambda i: (i.order, i.path.name))], is_directory


def _fetch_latest(store: _s3.S3Location) -> Path | None:
    """The newest complete checkpoint in the store as a local path under CHECKPOINT_DIR (downloaded once, into a
    temporary name renamed into place, so an interrupted download is never taken for a checkpoint)."""
    s3 = _s3.client()
    ordered, is_directory = _stored(s3, store)
    if not ordered:
        return None
    name = ordered[-1]
    directory = checkpoint_dir()
    local = directory / name
    if os.path.lexists(local):
        return local
    directory.mkdir(parents=True, exist_ok=True)
    temp = directory / f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        _s3.download(s3, store, name, is_directory[name], temp)
        _replace(temp, local)
    except BaseException:
        _remove(temp)
        raise
    return local


def _replace(temp: Path, final: Path) -> None:
    """Rename temp to final. A directory can't replace an existing one, so that one is first moved aside."""
    if os.path.lexists(final) and (final.is_dir() or temp.is_dir()):
        aside = final.with_name(f".{final.name}.old-{secrets.token_hex(4)}")
        os.replace(final, aside)
        os.replace(temp, final)
        _remove(aside)
    else:
        os.replace(temp, final)


def _remove(path: Path, *, strict: bool = False) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    except OSError:
        if strict:
            raise
        log.debug("cannot remove %s", path, exc_info=True)
