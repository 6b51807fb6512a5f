"""Manifests read from a pinned Go module's source (cluster/build.py: module_dir) are there on a fresh machine too.

MultiKueue's test reads the PyTorchJob CRD from the Kubeflow module, whose binary `make test` never builds: on a
machine whose Go module cache lacks it, `go list -m` named the module without a directory (KeyError: 'Dir'). The
source must be downloaded through the module proxy instead, as `go mod download` does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.kubeflow import KUBEFLOW
from trainingjob.cluster.build import module_dir


def test_a_module_missing_from_the_go_cache_is_downloaded_for_its_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "gomodcache"
    monkeypatch.setenv("GOMODCACHE", str(cache))
    try:
        directory = module_dir(KUBEFLOW)
        assert directory.is_relative_to(cache)
        assert (directory / "manifests/base/crds/kubeflow.org_pytorchjobs.yaml").is_file()
    finally:  # the module cache's files are read-only: let go remove them
        subprocess.run(["go", "clean", "-modcache"], env={**os.environ, "GOMODCACHE": str(cache)}, check=False)
