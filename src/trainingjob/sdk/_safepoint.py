"""Where the training loop's state is whole: the places a requested stop may take effect.

Why a module of its own with no imports: progress.py and checkpoint.py mark safe points, and stop.py (which needs
both to save and report) decides what a safe point does; a hook here keeps the imports one-way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# Set by stop.on_stop: called at every safe point with the checkpoint saved there (or None). It may end the process.
hook: Callable[[Path | None], None] | None = None


def reached(saved: Path | None = None) -> None:
    """The loop is at a safe point (after a progress report, or right after `saved` was written)."""
    if hook is not None:
        hook(saved)
