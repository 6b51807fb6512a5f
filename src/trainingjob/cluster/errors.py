"""Errors the local control plane reports to people: each says what failed and what to look at."""

from __future__ import annotations

from pathlib import Path


class ClusterError(RuntimeError):
    """A failure of the local control plane, with a message meant for the person who ran `tj cluster`."""


def log_tail(path: Path, lines: int = 30) -> str:
    """Last lines of a component or build log, so an error shows its cause without opening files."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    tail = text.splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in tail) or "    (log is empty)"
