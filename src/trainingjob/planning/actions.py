"""What a planner asks the apply layer to do, and the Events it records. Plain data: a planner never performs I/O
itself; the apply layers (operator/<kind>/apply.py) and the writer (operator/runtime/writer.py) do."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol


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
    """Delete the planned object itself (a TrainingJob's ttlSecondsAfterFinished); garbage collection takes its
    children."""


@dataclass(frozen=True)
class Event:
    """An Event to record on the planned object: type Normal or Warning, a CamelCase reason, a message."""

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
