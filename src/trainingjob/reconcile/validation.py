"""Checks only the operator can make (the schema and CEL cannot): each returns a message for the user.

A job that fails one ends in phase Failed with condition reason InvalidSpec and an Event; it is never retried.
"""

from __future__ import annotations

import re
from collections import Counter

from trainingjob.api import constants as k
from trainingjob.api.types import JobSpec
from trainingjob.builders.env import hyperparameter_env_name
from trainingjob.frameworks.registry import FRAMEWORKS

OPERATOR_MOUNT_PATHS = (k.SHM_MOUNT_PATH, k.CONFIG_MOUNT_PATH)
KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
MAX_KEY_LENGTH = 63


def spec_errors(spec: JobSpec) -> list[str]:
    errors: list[str] = []
    if spec.framework not in FRAMEWORKS:
        errors.append(f"spec.framework {spec.framework!r} is not supported (one of: {', '.join(FRAMEWORKS)})")
    errors += _hyperparameter_key_problems(spec)
    errors += _hyperparameter_collisions(spec)
    errors += _volume_mount_problems(spec)
    return errors


def _hyperparameter_key_problems(spec: JobSpec) -> list[str]:
    """The schema cannot see keys of an untyped map, so key syntax is ours to check."""
    bad = sorted(key for key in spec.hyperparameters if len(key) > MAX_KEY_LENGTH or not KEY_PATTERN.match(key))
    if not bad:
        return []
    return [
        f"spec.hyperparameters keys {bad} are invalid: each must match {KEY_PATTERN.pattern} and be at most "
        f"{MAX_KEY_LENGTH} characters"
    ]


def _hyperparameter_collisions(spec: JobSpec) -> list[str]:
    names = Counter(hyperparameter_env_name(key) for key in spec.hyperparameters)
    clashes = sorted(name for name, count in names.items() if count > 1)
    if not clashes:
        return []
    keys = sorted(key for key in spec.hyperparameters if hyperparameter_env_name(key) in clashes)
    return [f"spec.hyperparameters keys {keys} all become env {clashes}; rename one of them"]


def _volume_mount_problems(spec: JobSpec) -> list[str]:
    known = {"dshm", "tj-config"} | {v.get("name") for v in spec.volumes}
    reserved_paths = set(OPERATOR_MOUNT_PATHS)
    if spec.data_volume is not None:
        known.add("data")
        reserved_paths.add(spec.data_volume.mount_path)
    problems = []
    for mount in spec.volume_mounts:
        if mount.get("name") not in known:
            problems.append(f"spec.volumeMounts: {mount.get('name')!r} is not a volume of this job")
        if mount.get("mountPath") in reserved_paths:
            problems.append(f"spec.volumeMounts: {mount.get('mountPath')!r} is already mounted by the operator")
    return problems
