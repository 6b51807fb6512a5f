"""A Pod's status.phase (Kubernetes' own five values), for the node agent that writes it and the planners that read
it, so no module compares a phase spelled as a string. A `str` enum: a member is written to and compared with the
API's value as it is."""

from __future__ import annotations

from enum import StrEnum


class PodPhase(StrEnum):
    """core/v1 PodPhase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


# A pod whose containers will not run again (restartPolicy allowing): the kubelet and our node agent stop it.
POD_FINISHED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
# A pod that holds (or waits for) its node's resources.
POD_ACTIVE = frozenset({PodPhase.PENDING, PodPhase.RUNNING})


class ClaimPhase(StrEnum):
    """core/v1 PersistentVolumeClaimPhase."""

    PENDING = "Pending"
    BOUND = "Bound"
    LOST = "Lost"
