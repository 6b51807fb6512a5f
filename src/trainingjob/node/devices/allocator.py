"""Exclusive GPU assignment per container, as the kubelet's device manager does it with a device plugin.

When a pod is admitted, each of its containers that asks for `nvidia.com/gpu` gets that many free devices, never
shared with another container; the assignment holds across the container's restarts and is released when the pod
has ended (finished or deleted), as the kubelet reclaims a terminated pod's devices. A pod asking for more than
is free (the scheduler counts the node's capacity, so only a pod bound around it gets here) is rejected the
kubelet's way: phase Failed, reason UnexpectedAdmissionError.

Assignments are written to a checkpoint (`devices/checkpoint.json`, like kubelet_internal_checkpoint) before the
container starts, so an agent that restarts keeps them; those of pods the API no longer has are dropped at recovery.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from trainingjob.node.devices.gpus import GpuDevice, GpuInventory
from trainingjob.node.runtime.launch import read_json, write_json

GPU_RESOURCE = "nvidia.com/gpu"
CHECKPOINT = "checkpoint.json"


class AdmissionError(Exception):
    """The pod asks for devices the node does not have free (the kubelet's UnexpectedAdmissionError)."""

    reason = "UnexpectedAdmissionError"


def gpus_requested(container: Mapping[str, Any]) -> int:
    """`nvidia.com/gpu` of a container: extended resources are whole numbers, limits equal requests."""
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(GPU_RESOURCE)
    return int(str(value)) if value is not None else 0


def assignment_key(pod_uid: str, container: str) -> str:
    return f"{pod_uid}/{container}"


class DeviceAllocator:
    def __init__(self, inventory: GpuInventory, directory: Path) -> None:
        self.inventory = inventory
        self.by_id = {device.uuid: device for device in inventory.devices}
        self.path = directory / CHECKPOINT
        directory.mkdir(parents=True, exist_ok=True)
        saved = (read_json(self.path) or {}).get("assignments") or {}
        # Devices the inventory no longer has (another fake count, a GPU gone) are dropped from what was saved.
        self.assignments: dict[str, list[str]] = {
            key: [d for d in ids if d in self.by_id] for key, ids in saved.items() if isinstance(ids, list)
        }

    def _save(self) -> None:
        write_json(self.path, {"assignments": self.assignments})

    def free(self) -> list[GpuDevice]:
        taken = {device for ids in self.assignments.values() for device in ids}
        return [d for d in self.inventory.devices if d.uuid not in taken]

    def devices_of(self, pod_uid: str, container: str) -> list[GpuDevice]:
        return [self.by_id[d] for d in self.assignments.get(assignment_key(pod_uid, container), [])]

    def admit(self, pod: Mapping[str, Any]) -> None:
        """Assign devices to every container of `pod` that asks for GPUs and has none yet (all or nothing)."""
        uid = pod["metadata"]["uid"]
        spec = pod["spec"]
        wanted = {
            c["name"]: gpus_requested(c)
            for c in [*(spec.get("initContainers") or []), *spec["containers"]]
            if assignment_key(uid, c["name"]) not in self.assignments
        }
        wanted = {name: count for name, count in wanted.items() if count > 0}
        needed = sum(wanted.values())
        if not needed:
            return
        free = self.free()
        if needed > len(free):
            raise AdmissionError(
                f"Allocate failed due to requested number of devices unavailable for {GPU_RESOURCE}. "
                f"Requested: {needed}, Available: {len(free)}, which is unexpected"
            )
        for name, count in wanted.items():
            self.assignments[assignment_key(uid, name)] = [d.uuid for d in free[:count]]
            free = free[count:]
        self._save()

    def release_pod(self, pod_uid: str) -> None:
        prefix = f"{pod_uid}/"
        if any(key.startswith(prefix) for key in self.assignments):
            self.assignments = {k: v for k, v in self.assignments.items() if not k.startswith(prefix)}
            self._save()

    def keep_only(self, pod_uids: Iterable[str]) -> None:
        """Drop the assignments of pods not in `pod_uids` (recovery: the API no longer has them)."""
        known = set(pod_uids)
        kept = {k: v for k, v in self.assignments.items() if k.split("/", 1)[0] in known}
        if kept != self.assignments:
            self.assignments = kept
            self._save()

    def assigned(self) -> dict[str, list[GpuDevice]]:
        """Every current assignment, by "<pod uid>/<container>" (what telemetry samples)."""
        return {key: [self.by_id[d] for d in ids] for key, ids in self.assignments.items()}
