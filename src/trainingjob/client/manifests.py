"""One TrainingJob manifest from what a caller hands `submit()`: a dict, YAML text or a YAML file (pure; the
checks are the CLI's, so `tj submit -f` and the client refuse the same things with the same words)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainingjob.cli.manifest import ManifestError, check_manifest, manifests_from_yaml
from trainingjob.client.errors import TrainingClientError

MAX_PATH_LENGTH = 4096


def one_manifest(job: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """The one TrainingJob in `job`, as a dict of its own (the caller's object is never changed)."""
    try:
        if isinstance(job, Mapping):
            manifest = copy.deepcopy(dict(job))
            check_manifest(manifest, "the manifest")
            return manifest
        documents = manifests_from_yaml(*_text(job))
    except ManifestError as error:
        raise TrainingClientError(str(error)) from None
    if len(documents) != 1:
        raise TrainingClientError(f"submit takes one TrainingJob at a time; found {len(documents)}")
    return documents[0]


def _text(job: str | Path) -> tuple[str, str]:
    """(YAML text, where it came from): a Path or a string naming an existing file is read, other strings are YAML."""
    path = Path(job)
    is_file = isinstance(job, Path) or ("\n" not in job and len(job) < MAX_PATH_LENGTH and path.is_file())
    if not is_file:
        return str(job), "the manifest"
    try:
        return path.read_text(), str(path)
    except OSError as error:
        raise TrainingClientError(f"cannot read {path}: {error.strerror or error}") from None
