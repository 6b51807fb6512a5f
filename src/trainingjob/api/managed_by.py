"""spec.managedBy: which controller reconciles a TrainingJob (KEP-4368's convention, as Job, JobSet and Kubeflow's
jobs have it).

Why: MultiKueue copies a job to a worker cluster and syncs its status back to the manager cluster; on the manager
the job's own controller must create nothing and write nothing, or two controllers would run one job. A job names
the controller that owns it, and every other controller of its kind leaves it alone. The field is immutable: a job
handed from one controller to another mid-run would have children and status neither of them made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as c
from trainingjob.api.schema_builders import Schema, rule, string

# As Job's spec.managedBy: a domain-prefixed path of at most 63 characters.
MAX_LENGTH = 63
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SEGMENT = r"[A-Za-z0-9._~-]+"
DOMAIN_PREFIXED_PATH = rf"^{_LABEL}(\.{_LABEL})*/{_SEGMENT}(/{_SEGMENT})*$"


def managed_by(body: Mapping[str, Any]) -> str | None:
    """The job's spec.managedBy as written (None when unset)."""
    value = (body.get("spec") or {}).get("managedBy")
    return str(value) if value is not None else None


def managed_here(body: Mapping[str, Any]) -> bool:
    """Whether this operator reconciles the job: managedBy unset or naming this operator."""
    return managed_by(body) in (None, c.CONTROLLER_NAME)


def managed_by_schema() -> Schema:
    return string(
        "The controller that reconciles this job. Unset or "
        f"{c.CONTROLLER_NAME}: this operator creates the job's workers and writes its status. Any other value, "
        f"e.g. {c.MULTIKUEUE_CONTROLLER} (Kueue's MultiKueue, which runs the job on a worker cluster and copies "
        "its status back): this operator leaves the job alone, creating no pods, Service, ConfigMap or volume, "
        "adding no finalizer and writing no status. A domain-prefixed path of at most "
        f"{MAX_LENGTH} characters. Immutable.",
        max_length=MAX_LENGTH,
        pattern=DOMAIN_PREFIXED_PATH,
        rules=[rule("self == oldSelf", "managedBy is immutable; create a new TrainingJob for another controller")],
    )


def managed_by_rules() -> list[Schema]:
    """Spec-level: the field rule above sees changes of a value set on both sides only."""
    return [
        rule(
            "has(self.managedBy) == has(oldSelf.managedBy)",
            "managedBy cannot be added or removed; create a new TrainingJob for another controller",
            field_path=".managedBy",
        )
    ]
