"""Where the local control plane keeps binaries (per version, shared) and state (per cluster, disposable)."""

from __future__ import annotations

import os
from pathlib import Path

from trainingjob.paths import REPO_ROOT, cache_root


def tools_dir() -> Path:
    """The wrapper go.mod files that pin upstream components (our files only, under tools/)."""
    configured = os.environ.get("TJ_TOOLS_DIR")
    return Path(configured) if configured else REPO_ROOT / "tools"


def binaries_dir(component_set: str, version: str) -> Path:
    """One directory per pinned version, so a version bump never reuses a stale binary."""
    return cache_root() / "bin" / f"{component_set}-{version}"


def cluster_dir(name: str) -> Path:
    """State of one named cluster: PKI, kubeconfigs, etcd data, logs and pid files."""
    return cache_root() / "clusters" / name
