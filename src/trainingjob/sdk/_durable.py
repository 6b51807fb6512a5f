"""Flushing what a checkpoint save wrote to stable storage before it is renamed into place.

Why a module of its own: checkpoint.py's save is only atomic if the data reaches the disk before the rename does
(otherwise a crash can leave a complete name over incomplete data), and these helpers are the part of that which
knows about files and directories, not about checkpoints.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_tree(path: Path) -> None:
    """Flush a written file, or every file and directory of a written directory tree, to stable storage."""
    if path.is_symlink():
        return
    if not path.is_dir():
        fsync(path)
        return
    for root, _dirs, files in os.walk(path):
        for name in files:
            child = Path(root, name)
            if not child.is_symlink():
                fsync(child)
        fsync(Path(root), is_dir=True)


def fsync(path: Path, *, is_dir: bool = False) -> None:
    """fsync a file (errors propagate: the data may not be safe) or a directory (best effort: not every OS can)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if is_dir:
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not is_dir:
            raise
    finally:
        os.close(fd)
