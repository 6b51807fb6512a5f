"""What differs between the served versions of TrainingJob, in one table that the schema and the conversion share.

Every spec field has the same name, meaning and schema in every version unless it is listed here. So a field added
to the shared schema (schema_spec.py, schema_pod.py, schema_lifecycle.py) is served by both versions and converted
by copying, with nothing else to touch; a field that needs another name or default in one version gets a row here.

v1 takes its names and defaults from the seed guide (`numWorkers`, `gpusPerWorker` defaulting to 1,
`checkpoint.frequency`, `checkpoint.enabled` defaulting to true, a `framework` defaulting to pytorch and an image
the operator may derive from `model`); v1alpha1 keeps the names the lab and the lecture use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainingjob.api import constants as c


@dataclass(frozen=True)
class VersionShape:
    """The names and defaults of one version's spec fields that are not the same in every version."""

    version: str
    workers: str  # number of worker pods (also the scale subresource's spec path)
    gpus: str  # GPUs per worker
    checkpoint_interval: str  # in spec.checkpoint: save every this many epochs
    default_gpus: int
    default_checkpoint_enabled: bool
    # Spec fields the schema requires; v1 requires none of these by name (framework has a default, and an image
    # is required by a rule whose message says how the operator can derive it).
    required: tuple[str, ...]
    # Whether a missing framework is defaulted (v1: to pytorch, as the guide's jobs assume).
    default_framework: str | None

    @property
    def api_version(self) -> str:
        return f"{c.GROUP}/{self.version}"


V1ALPHA1 = VersionShape(
    version=c.V1ALPHA1,
    workers="workers",
    gpus="gpuPerWorker",
    checkpoint_interval="interval",
    default_gpus=0,
    default_checkpoint_enabled=False,
    required=("framework", "image", "command"),
    default_framework=None,
)
V1 = VersionShape(
    version=c.V1,
    workers="numWorkers",
    gpus="gpusPerWorker",
    checkpoint_interval="frequency",
    default_gpus=1,
    default_checkpoint_enabled=True,
    required=(),
    default_framework="pytorch",
)
SHAPES = {shape.version: shape for shape in (V1ALPHA1, V1)}
assert tuple(SHAPES) == c.SERVED_VERSIONS, "one shape per served version, in the CRD's order"


def shape_of(api_version: str) -> VersionShape:
    """The shape of `group/version` (or a bare version); KeyError for a version this code does not serve."""
    return SHAPES[api_version.rpartition("/")[2]]


def field_names_as_written(text: str, written: VersionShape) -> str:
    """`text`, a message about an object in v1's names, with v1's fields named as `written` calls them.

    `tj submit` converts a v1alpha1 manifest to v1 (the storage version) before creating it, so the API server's
    message would name `spec.gpusPerWorker` for a file that says `gpuPerWorker`: the user should read the name they
    wrote. Only v1's names are replaced; they are distinctive words, where v1alpha1's (`workers`) are not.
    """
    renames = (
        (V1.workers, written.workers),
        (V1.gpus, written.gpus),
        (f"checkpoint.{V1.checkpoint_interval}", f"checkpoint.{written.checkpoint_interval}"),
    )
    for v1_name, name in renames:
        text = re.sub(rf"\b{re.escape(v1_name)}\b", name, text)
    return text
