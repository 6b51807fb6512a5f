"""The node's GPUs: found through NVML on a machine that has NVIDIA GPUs, or made up in the labelled fake mode.

`NodeConfig.gpus` chooses: `auto` (the default: NVML's devices when the binding and the driver are there, else
none), `none`, or `fake:N` — N fake devices for tests on machines without GPUs. Fake devices go through exactly the
same allocation, environment and mount path as real ones (devices/allocator.py, pods/starter.py); what is fake is
only what they are: each one's "device node" is a plain file under the node's state directory (bind-mounted at
/dev/nvidia<N> like a real one, so a container sees only the devices it was given), their product is
`TrainingJob-Fake-GPU`, the node carries the label `ml.example.com/fake-gpus=true`, and their telemetry is derived
from the container's CPU use (devices/telemetry.py). Nothing in fake mode can run CUDA.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from trainingjob.node.devices.nvml import NvmlUnavailable, load_nvml, read_system

log = logging.getLogger(__name__)
FAKE_PRODUCT = "TrainingJob-Fake-GPU"
FAKE_MEMORY_MIB = 16 * 1024
FAKE_LABEL = "ml.example.com/fake-gpus"
# Device nodes a CUDA process needs besides its GPUs' own (those that exist are shared, as the toolkit mounts them).
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
MAX_FAKE_GPUS = 64


class GpuModeError(ValueError):
    """A `gpus` setting the node does not understand."""


@dataclass(frozen=True)
class GpuDevice:
    """One device as the allocator hands it out: its ID (the UUID), and what a container needs to use it."""

    uuid: str
    index: int
    device_node: str  # host path, mounted at /dev/nvidia<index or minor> in the container
    container_path: str
    proc_dir: str | None = None  # /proc/driver/nvidia/gpus/<bus id> (real devices only)


@dataclass
class GpuInventory:
    devices: list[GpuDevice] = field(default_factory=list)
    product: str = ""
    memory_mib: int = 0
    driver_version: str = ""
    cuda_version: tuple[int, int] | None = None
    fake: bool = False
    control_nodes: list[tuple[str, str]] = field(default_factory=list)  # (host path, path in the container)

    @property
    def count(self) -> int:
        return len(self.devices)


def parse_mode(mode: str) -> tuple[str, int]:
    """("auto"|"none"|"fake", fake count)."""
    if mode in ("auto", "none"):
        return mode, 0
    kind, _, count = mode.partition(":")
    if kind == "fake" and count.isdigit() and 0 < int(count) <= MAX_FAKE_GPUS:
        return "fake", int(count)
    raise GpuModeError(f"gpus must be auto, none or fake:N (1 to {MAX_FAKE_GPUS}), not {mode!r}")


def discover(mode: str, state_dir: Path, node: str) -> GpuInventory:
    kind, count = parse_mode(mode)
    if kind == "none":
        return GpuInventory()
    if kind == "fake":
        return fake_inventory(count, state_dir / "devices" / "fake", node)
    try:
        return nvml_inventory()
    except NvmlUnavailable as error:
        log.info("node %s offers no GPUs: %s", node, error)
        return GpuInventory()


def product_label(name: str) -> str:
    """GPU feature discovery's form: "NVIDIA H200" -> "NVIDIA-H200"."""
    return "-".join(name.split())


def nvml_inventory() -> GpuInventory:
    system = read_system(load_nvml())
    devices = [
        GpuDevice(
            uuid=d.uuid,
            index=d.index,
            device_node=f"/dev/nvidia{d.minor}",
            container_path=f"/dev/nvidia{d.minor}",
            proc_dir=f"/proc/driver/nvidia/gpus/{d.pci_bus_id}",
        )
        for d in system.devices
    ]
    first = system.devices[0] if system.devices else None
    return GpuInventory(
        devices=devices,
        product=product_label(first.name) if first else "",
        memory_mib=first.memory_mib if first else 0,
        driver_version=system.driver_version,
        cuda_version=system.cuda_version,
        control_nodes=[(path, path) for path in CONTROL_NODES if Path(path).exists()],
    )


def fake_uuid(node: str, index: int) -> str:
    """Stable across agent restarts, different between nodes, shaped like NVML's "GPU-<uuid>"."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"trainingjob-fake-gpu://{node}/{index}"))


def fake_inventory(count: int, directory: Path, node: str) -> GpuInventory:
    directory.mkdir(parents=True, exist_ok=True)
    devices = []
    for index in range(count):
        node_file = directory / f"nvidia{index}"
        device_id = fake_uuid(node, index)
        node_file.write_text(f"fake GPU {index} of node {node} ({device_id}): not a device, no CUDA\n")
        devices.append(GpuDevice(device_id, index, str(node_file), f"/dev/nvidia{index}"))
    control = directory / "nvidiactl"
    control.write_text("fake NVIDIA control device: not a device\n")
    return GpuInventory(
        devices=devices,
        product=FAKE_PRODUCT,
        memory_mib=FAKE_MEMORY_MIB,
        fake=True,
        control_nodes=[(str(control), "/dev/nvidiactl")],
    )
