"""Where a run starts: from scratch, from its own newest checkpoint (a restarted or resumed attempt), or from
another run's (spec.checkpoint.resumeFrom). RESUME_FROM_CHECKPOINT says which; see resume_checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import _env
from .checkpoint import claim_checkpoints, latest_checkpoint, parse_checkpoint


def resume_requested() -> bool:
    """Whether this attempt should resume: RESUME_FROM_CHECKPOINT is ``true`` or a checkpoint's path (what the
    operator sets on a restarted attempt when it knows the newest checkpoint, as seed 002's operator does)."""
    value = os.environ.get(_env.RESUME_FROM_CHECKPOINT, "").strip()
    return value.lower() not in ("", "false")


def resume_checkpoint(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The checkpoint to resume from, or None to start from scratch.

    RESUME_FROM_CHECKPOINT says whether and from where: ``false`` or unset, start from scratch; ``true`` (a
    restarted or resumed attempt), the newest checkpoint of this run in `directory` (default CHECKPOINT_DIR); a
    path (spec.checkpoint.resumeFrom: another run's directory or checkpoint), this run's own newest checkpoint when
    it has one, else the newest checkpoint at that path (or the path itself when its name is a checkpoint's).
    Own checkpoints come first: they are this run's later progress, whatever it was started from.
    Resuming fences older attempts out of this run's checkpoints first (claim_checkpoints): a gang that was replaced
    but trains on, unseen, stops at its next save instead of replacing or pruning what this attempt saves.
    """
    value = os.environ.get(_env.RESUME_FROM_CHECKPOINT, "").strip()
    if value.lower() in ("", "false", "0", "no"):
        return None
    claim_checkpoints(directory)
    own = latest_checkpoint(directory)
    if own is not None or value.lower() == "true":
        return own
    source = Path(value)
    if parse_checkpoint(source) is not None:
        return source if os.path.lexists(source) else None
    return latest_checkpoint(source)


def resume_point(directory: str | os.PathLike[str] | None = None) -> tuple[int, Path | None]:
    """(first epoch to train, checkpoint to load), with epochs counted from 1: ckpt-E holds the state after epoch
    E, so training continues at E + 1 (at E for a checkpoint taken at a step inside E). Without a checkpoint to
    resume from (see resume_checkpoint), epoch 1 and None. `directory`: CHECKPOINT_DIR."""
    checkpoint = resume_checkpoint(directory)
    info = parse_checkpoint(checkpoint) if checkpoint is not None else None
    if info is None:
        return 1, None
    return (info.epoch + 1 if info.step is None else info.epoch), checkpoint


def should_resume(directory: str | os.PathLike[str] | None = None) -> bool:
    """Whether to resume: RESUME_FROM_CHECKPOINT asks for it and there is a checkpoint (see resume_checkpoint)."""
    return resume_checkpoint(directory) is not None
