"""The TrainingJob CustomResourceDefinition, built in Python: the single source of truth for the API.

Both served versions are built from the same field schemas (schema_spec.py and the modules it merges), in the
names and defaults api/versions.py gives each version; v1 is the storage version and every version converts
through the operator's webhook (api/webhook_config.py, api/conversion.py).

deploy/crd/ holds the same document as YAML, generated from here by `make generate` (trainingjob.api.generate);
the tests install crd_manifest() itself, so what is tested is what is shipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainingjob.api import constants as c
from trainingjob.api import webhook_config
from trainingjob.api.schema_builders import Schema, obj, rule, string
from trainingjob.api.schema_spec import spec_schema
from trainingjob.api.schema_status import status_schema, status_schema_v1
from trainingjob.api.versions import SHAPES, VersionShape

# A DNS-1035 label: the headless Service `<name>-workers` needs one, so the job name must start with a letter.
DNS_1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


def _name_rules() -> list[Schema]:
    """Rules on metadata.name, which must leave room for the names of the children derived from it."""
    return [
        rule(
            f"self.metadata.name.size() <= {c.MAX_JOB_NAME_LENGTH}",
            f"metadata.name must be at most {c.MAX_JOB_NAME_LENGTH} characters: worker pods are named "
            "<name>-worker-<index> and a pod hostname is at most 63 characters",
            field_path=".metadata.name",
        ),
        rule(
            f"self.metadata.name.matches('{DNS_1035_LABEL}')",
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter): "
            "the headless Service <name>-workers is named after it",
            field_path=".metadata.name",
        ),
    ]


def _metadata() -> Schema:
    """metadata may only restate name and generateName, and takes no description (kubectl explain shows the
    standard ObjectMeta); declaring name lets the name rules report their errors at metadata.name."""
    return {
        "type": "object",
        "properties": {
            "name": string(f"Name of the job: a DNS-1035 label of at most {c.MAX_JOB_NAME_LENGTH} characters.")
        },
    }


def _root_schema(shape: VersionShape, added: Mapping[str, Schema] | None) -> Schema:
    root = obj(
        f"{c.KIND} runs one distributed training job: a gang of worker pods of one framework ("
        f"{', '.join(c.FRAMEWORKS)}) that the operator creates, wires together, restarts by policy and cleans up.",
        {
            "apiVersion": string(f"Versioned schema of this object: {shape.api_version}."),
            "kind": string(f"Kind of this object: {c.KIND}."),
            "spec": spec_schema(shape, added),
            "status": status_schema_v1() if shape.version == c.V1 else status_schema(),
        },
        required=["spec"],
        rules=_name_rules(),
    )
    root["properties"] = {"metadata": _metadata(), **root["properties"]}
    return root


def _column(name: str, type_: str, path: str, description: str, priority: int = 0) -> Schema:
    column: Schema = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        column["priority"] = priority
    column["description"] = description
    return column


AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
RUNTIME_COLUMN = _column("Runtime", "string", ".spec.runtimeRef.name", "Runtime the job starts from", priority=1)


def _printer_columns_v1alpha1() -> list[Schema]:
    return [
        _column("Framework", "string", ".spec.framework", "Training framework"),
        _column("Workers", "integer", ".spec.workers", "Desired workers"),
        _column("Phase", "string", ".status.phase", "Lifecycle phase"),
        _column("Restarts", "integer", ".status.restartCount", "Restarts after failures", priority=1),
        _column(
            "Progress",
            "number",
            ".status.progress.percent",
            "Training progress in percent, reported by the chief worker",
        ),
        _column("ETA", "integer", ".status.progress.estimatedRemainingSeconds", "Estimated seconds left"),
        RUNTIME_COLUMN,
        AGE_COLUMN,
    ]


def _printer_columns_v1() -> list[Schema]:
    """The guide's columns first (State, Progress, Epoch, Workers, Age); the rest with `kubectl get -o wide`."""
    return [
        _column("State", "string", ".status.state", "Lifecycle state"),
        _column("Progress", "string", ".status.progress", "Training progress, reported by the chief worker"),
        _column("Epoch", "integer", ".status.currentEpoch", "Current training epoch"),
        _column("Workers", "integer", ".spec.numWorkers", "Desired workers"),
        _column("Framework", "string", ".spec.framework", "Training framework", priority=1),
        _column("Restarts", "integer", ".status.restartCount", "Restarts after failures", priority=1),
        _column(
            "ETA", "integer", ".status.progressDetails.estimatedRemainingSeconds", "Estimated seconds left", priority=1
        ),
        RUNTIME_COLUMN,
        AGE_COLUMN,
    ]


def _version(shape: VersionShape, added: Mapping[str, Schema] | None = None) -> Schema:
    return {
        "name": shape.version,
        "served": True,
        "storage": shape.version == c.STORAGE_VERSION,
        "schema": {"openAPIV3Schema": _root_schema(shape, added)},
        "subresources": {
            "status": {},
            "scale": {
                "specReplicasPath": f".spec.{shape.workers}",
                "statusReplicasPath": ".status.workers",
                "labelSelectorPath": ".status.selector",
            },
        },
        "additionalPrinterColumns": _printer_columns_v1() if shape.version == c.V1 else _printer_columns_v1alpha1(),
    }


def crd_manifest(added_spec_fields: Mapping[str, Schema] | None = None) -> Schema:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of TrainingJob, as a dict ready to apply.

    `added_spec_fields`: spec fields a later release would add, in every served version. Upgrade tests build the
    CRD a newer operator would ship from this same source instead of editing a copy by hand, so it cannot drift
    from the shipped one (tests/integration/test_upgrades_and_defaults.py)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": c.CRD_NAME},
        "spec": {
            "group": c.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": c.KIND,
                "listKind": f"{c.KIND}List",
                "plural": c.PLURAL,
                "singular": c.SINGULAR,
                "shortNames": list(c.SHORT_NAMES),
                "categories": ["all", "ml"],
            },
            "versions": [_version(SHAPES[version], added_spec_fields) for version in c.SERVED_VERSIONS],
            "conversion": webhook_config.conversion(),
        },
    }
