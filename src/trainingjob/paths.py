"""Where the project's checkout is and where everything it builds or runs locally is kept (the control plane's
binaries, the local nodes' runtimes and pod state): shared by the local control plane (cluster/), the local node
(node/) and the UI's history, so it lives on the ground floor."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    """Root of everything we build or run; outside the repo so a fresh clone stays clean."""
    configured = os.environ.get("TJ_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "trainingjob"
