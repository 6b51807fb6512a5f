"""The TrainingJob CustomResourceDefinition, built in Python: the single source of truth for the API.

deploy/crd/ holds the same document as YAML, generated from here by `make generate` (trainingjob.api.generate);
the tests install crd_manifest() itself, so what is tested is what is shipped.
"""

from __future__ import annotations

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, obj, rule, string
from trainingjob.api.schema_spec import spec_schema
from trainingjob.api.schema_status import status_schema

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


def _root_schema() -> Schema:
    root = obj(
        f"{c.KIND} runs one distributed training job: a gang of worker pods of one framework ("
        f"{', '.join(c.FRAMEWORKS)}) that the operator creates, wires together, restarts by policy and cleans up.",
        {
            "apiVersion": string(f"Versioned schema of this object: {c.API_VERSION}."),
            "kind": string(f"Kind of this object: {c.KIND}."),
            "spec": spec_schema(),
            "status": status_schema(),
        },
        required=["spec"],
        rules=_name_rules(),
    )
    root["properties"] = {"metadata": _metadata(), **root["properties"]}
    return root


def _printer_columns() -> list[Schema]:
    return [
        {"name": "Framework", "type": "string", "jsonPath": ".spec.framework", "description": "Training framework"},
        {"name": "Workers", "type": "integer", "jsonPath": ".spec.workers", "description": "Desired workers"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "description": "Lifecycle phase"},
        {
            "name": "Restarts",
            "type": "integer",
            "jsonPath": ".status.restartCount",
            "priority": 1,
            "description": "Restarts after failures",
        },
        {
            "name": "Progress",
            "type": "number",
            "jsonPath": ".status.progress.percent",
            "description": "Training progress in percent, reported by the chief worker",
        },
        {
            "name": "ETA",
            "type": "integer",
            "jsonPath": ".status.progress.estimatedRemainingSeconds",
            "description": "Estimated seconds left",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def _version() -> Schema:
    return {
        "name": c.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _root_schema()},
        "subresources": {
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.workers",
                "statusReplicasPath": ".status.workers",
                "labelSelectorPath": ".status.selector",
            },
        },
        "additionalPrinterColumns": _printer_columns(),
    }


def crd_manifest() -> Schema:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of TrainingJob, as a dict ready to apply."""
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
            "versions": [_version()],
        },
    }
