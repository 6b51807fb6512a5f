"""What the planner asks the apply layer to do. Plain data: the planner never performs I/O itself."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainingjob.api.status import JobStatus


@dataclass(frozen=True)
class _ManifestAction:
    manifest: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def name(self) -> str:
        return self.manifest["metadata"]["name"]


@dataclass(frozen=True)
class CreateChild(_ManifestAction):
    """Create a child; AlreadyExists counts as success (names are deterministic)."""


@dataclass(frozen=True)
class DeleteChild:
    """Delete a child; NotFound counts as success. `uid` guards against deleting a newer namesake. `force` deletes
    with gracePeriodSeconds 0: the object goes at once, without waiting for a kubelet that is gone. `api_version`
    of a child outside the core API (a gang object)."""

    kind: str
    name: str
    uid: str | None = None
    force: bool = False
    api_version: str = "v1"


@dataclass(frozen=True)
class ReplaceChild(_ManifestAction):
    """Put a child back as the planner wants it: a ConfigMap is replaced whole; a Service gets its spec merge-patched
    (ports, selector), so the clusterIP fields the API server allocated stay as they are."""


@dataclass(frozen=True)
class AddFinalizer:
    pass


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclass(frozen=True)
class DeleteJob:
    """Delete the TrainingJob itself (ttlSecondsAfterFinished); garbage collection takes its children."""


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


Action = CreateChild | DeleteChild | ReplaceChild | AddFinalizer | RemoveFinalizer | DeleteJob


class Deletable(Protocol):
    """A pod as the caches show it (its name, and its uid to delete no newer namesake)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...


def delete_pods(pods: Iterable[Deletable], force: bool = False) -> list[DeleteChild]:
    return [DeleteChild("Pod", p.name, p.uid or None, force) for p in pods]


@dataclass
class Plan:
    """The planner's answer: actions to apply, the status the job should have, events to record, when to look
    again; for a TrainingJob also the progress report its status now carries and whether a change of worker
    details alone is held back (reconcile/status.py: hold_details)."""

    actions: list[Action] = field(default_factory=list)
    # A TrainingJob's JobStatus; an LLMModel's status in its stored shape.
    status: Any = field(default_factory=JobStatus)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    report: Any = None
    details_held: bool = False
