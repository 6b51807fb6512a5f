"""GPU telemetry per device and per pod, exported as NVIDIA's DCGM exporter exports it (Prometheus text on :9400).

Every SAMPLE_SECONDS the node reads each device's utilisation and memory (NVML), and labels the devices assigned to
a container with that container's pod, namespace and container name, as dcgm-exporter does on a node with the
kubelet's pod-resources API: `DCGM_FI_DEV_GPU_UTIL` (%), `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE` (MiB),
labels `gpu`, `UUID`, `device`, `modelName`, `Hostname`, `container`, `namespace`, `pod`. Scrapes read the latest
sample; nothing is kept per scrape.

Fake mode (devices/gpus.py) has no NVML: a fake device's utilisation is the CPU its container used since the last
sample, as a percentage of one core (capped at 100), and its memory used is the container's memory (cgroup).
That keeps fake telemetry honest about the work a container does (a sleeping worker reads 0 %, a busy one near 100 %)
while saying plainly that it is not a GPU measurement (`modelName` TrainingJob-Fake-GPU, the node's fake label).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from trainingjob.node.devices.allocator import DeviceAllocator
from trainingjob.node.devices.gpus import GpuDevice, GpuInventory
from trainingjob.node.devices.nvml import MIB, NvmlSampler
from trainingjob.node.runtime import cgroups

SAMPLE_SECONDS = 10.0
METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
)


@dataclass(frozen=True)
class Owner:
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class DeviceSample:
    device: GpuDevice
    utilization: float
    memory_used_mib: int
    memory_free_mib: int
    owner: Owner | None = None


# (pod uid, container) -> (namespace, pod name, the container's current cgroup directories), or None when unknown.
ContainerLookup = Callable[[str, str], tuple[str, str, list[str]] | None]


class FakeMeter:
    """Fake utilisation from a container's CPU time between two samples (a percentage of one core)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.previous: dict[str, tuple[float, int]] = {}

    def measure(self, key: str, dirs: list[str], memory_mib: int) -> tuple[float, int, int]:
        used = cgroups.usage(dirs)
        now = self.clock()
        before = self.previous.get(key)
        self.previous[key] = (now, used.cpu_ns)
        busy = 0.0
        if before is not None and now > before[0]:
            busy = 100.0 * (used.cpu_ns - before[1]) / ((now - before[0]) * 1e9)
        memory = min(memory_mib, used.memory_bytes // MIB)
        return round(min(100.0, max(0.0, busy)), 1), memory, memory_mib - memory

    def keep_only(self, keys: set[str]) -> None:
        self.previous = {k: v for k, v in self.previous.items() if k in keys}


class GpuTelemetry:
    def __init__(
        self,
        inventory: GpuInventory,
        allocator: DeviceAllocator,
        lookup: ContainerLookup,
        sampler: NvmlSampler | None = None,
    ) -> None:
        self.inventory = inventory
        self.allocator = allocator
        self.lookup = lookup
        self.sampler = sampler
        self.fake_meter = FakeMeter()
        self.latest: list[DeviceSample] = []

    def sample(self) -> list[DeviceSample]:
        owners: dict[str, tuple[Owner, str, list[str]]] = {}
        for key, devices in self.allocator.assigned().items():
            uid, container = key.split("/", 1)
            found = self.lookup(uid, container)
            if found is None:
                continue
            namespace, pod, dirs = found
            for device in devices:
                owners[device.uuid] = (Owner(namespace, pod, container), key, dirs)
        samples = []
        for device in self.inventory.devices:
            owner, key, dirs = owners.get(device.uuid, (None, "", []))
            reading = self._read(device, key, dirs)
            if reading is not None:
                samples.append(DeviceSample(device, *reading, owner=owner))
        self.fake_meter.keep_only({key for _, key, _ in owners.values()})
        self.latest = samples
        return samples

    def _read(self, device: GpuDevice, key: str, dirs: list[str]) -> tuple[float, int, int] | None:
        if self.inventory.fake:
            if not key:
                return 0.0, 0, self.inventory.memory_mib
            return self.fake_meter.measure(key, dirs, self.inventory.memory_mib)
        return self.sampler.sample(device.uuid) if self.sampler is not None else None


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(samples: list[DeviceSample], inventory: GpuInventory, hostname: str) -> str:
    """The Prometheus text format, one series per device and metric."""
    lines = []
    for position, (name, kind, help_text) in enumerate(METRICS):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for sample in samples:
            labels = {
                "gpu": str(sample.device.index),
                "UUID": sample.device.uuid,
                "device": sample.device.container_path.rsplit("/", 1)[-1],
                "modelName": inventory.product,
                "Hostname": hostname,
            }
            if sample.owner is not None:
                labels |= {
                    "container": sample.owner.container,
                    "namespace": sample.owner.namespace,
                    "pod": sample.owner.pod,
                }
            value = (sample.utilization, sample.memory_used_mib, sample.memory_free_mib)[position]
            text = ",".join(f'{key}="{_label_value(v)}"' for key, v in labels.items())
            lines.append(f"{name}{{{text}}} {value:g}")
    return "\n".join(lines) + "\n"
