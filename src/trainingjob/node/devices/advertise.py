"""What the node tells about its GPUs (pure): capacity as the device plugin registers it, labels as NVIDIA's GPU
feature discovery writes them, and what a container given devices gets, as the container toolkit provides it.

Labels (GFD): `nvidia.com/gpu.present`, `.count`, `.product` ("NVIDIA-H200"), `.memory` (MiB), and from the driver
`nvidia.com/cuda.driver.major/.minor/.rev` and `nvidia.com/cuda.runtime.major/.minor`. A fake-mode node also says
`ml.example.com/fake-gpus=true`, so nobody mistakes it for a GPU machine.

A container's devices: `NVIDIA_VISIBLE_DEVICES` (the device plugin's UUID list) and `CUDA_VISIBLE_DEVICES` (the
same UUIDs, which CUDA accepts and which mean the same devices whatever their order inside the container; a value
the pod sets itself is kept), their device nodes and the shared control nodes bind-mounted into its /dev (nothing
else of /dev/nvidia* exists there), and /proc/driver/nvidia/gpus showing only its own devices.
"""

from __future__ import annotations

from trainingjob.node.devices.allocator import GPU_RESOURCE
from trainingjob.node.devices.gpus import FAKE_LABEL, GpuDevice, GpuInventory
from trainingjob.node.runtime.launch import Mount

PROC_GPUS = "/proc/driver/nvidia/gpus"


def gpu_capacity(inventory: GpuInventory) -> dict[str, str]:
    """Capacity and allocatable alike: no GPU is reserved for the system. A node without GPUs offers none."""
    return {GPU_RESOURCE: str(inventory.count)} if inventory.count else {}


def gpu_labels(inventory: GpuInventory) -> dict[str, str]:
    if not inventory.count:
        return {}
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": str(inventory.count),
        "nvidia.com/gpu.product": inventory.product,
        "nvidia.com/gpu.memory": str(inventory.memory_mib),
    }
    parts = inventory.driver_version.split(".")
    if len(parts) >= 2:
        labels["nvidia.com/cuda.driver.major"], labels["nvidia.com/cuda.driver.minor"] = parts[0], parts[1]
        labels["nvidia.com/cuda.driver.rev"] = parts[2] if len(parts) > 2 else ""
    if inventory.cuda_version is not None:
        labels["nvidia.com/cuda.runtime.major"] = str(inventory.cuda_version[0])
        labels["nvidia.com/cuda.runtime.minor"] = str(inventory.cuda_version[1])
    if inventory.fake:
        labels[FAKE_LABEL] = "true"
    return labels


def device_env(devices: list[GpuDevice], env: dict[str, str]) -> dict[str, str]:
    """The variables to add to `env` (the container's environment so far)."""
    if not devices:
        return {}
    ids = ",".join(d.uuid for d in devices)
    added = {"NVIDIA_VISIBLE_DEVICES": ids}
    if "CUDA_VISIBLE_DEVICES" not in env:
        added["CUDA_VISIBLE_DEVICES"] = ids
    return added


def device_mounts(devices: list[GpuDevice], inventory: GpuInventory, proc_exists: bool) -> list[Mount]:
    """The device nodes (and, for real devices, the driver's /proc view narrowed to them)."""
    if not devices:
        return []
    mounts = [Mount(d.container_path, d.device_node) for d in devices]
    mounts += [Mount(target, source) for source, target in inventory.control_nodes]
    own = [d.proc_dir for d in devices if d.proc_dir]
    if own and proc_exists:
        mounts.append(Mount(PROC_GPUS, kind="tmpfs", options="mode=555"))
        mounts += [Mount(path, path, read_only=True) for path in own]
    return mounts
