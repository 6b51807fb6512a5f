"""NVIDIA GPUs through NVML (the nvidia-ml-py binding, `pip install 'trainingjob-operator[gpu]'`): what the node
has, and how busy each device is.

Only the calls every NVML since CUDA 10 has: nvmlInit, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex,
nvmlDeviceGetName/UUID/MinorNumber/PciInfo/MemoryInfo/UtilizationRates, nvmlSystemGetDriverVersion and
nvmlSystemGetCudaDriverVersion. The binding is passed in (`load_nvml`), so the shape of every call is unit-tested
against a stand-in with NVML's signatures on machines without a GPU, and the real module is used where there is one.
A machine without the binding, the driver or a device has no NVIDIA GPUs (`NvmlUnavailable` says which).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

MIB = 2**20


class NvmlUnavailable(Exception):
    """No NVML here: the binding is not installed, or the driver's library did not load."""


@dataclass(frozen=True)
class NvmlDevice:
    index: int
    uuid: str
    name: str
    minor: int
    pci_bus_id: str  # "0000:3b:00.0", as /proc/driver/nvidia/gpus names it
    memory_mib: int


@dataclass(frozen=True)
class NvmlSystem:
    driver_version: str  # "560.35.03"
    cuda_version: tuple[int, int]  # (12, 6)
    devices: tuple[NvmlDevice, ...]


def load_nvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError as error:
        raise NvmlUnavailable("the nvidia-ml-py package is not installed") from error


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def proc_bus_id(nvml_bus_id: str | bytes) -> str:
    """NVML's "00000000:3B:00.0" as the kernel's /proc/driver/nvidia/gpus/ entry "0000:3b:00.0"."""
    domain, rest = _text(nvml_bus_id).lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def _cuda_version(encoded: int) -> tuple[int, int]:
    """nvmlSystemGetCudaDriverVersion's 12060 -> (12, 6)."""
    return encoded // 1000, (encoded % 1000) // 10


def read_system(nvml: Any) -> NvmlSystem:
    """Every device NVML sees; NVML is initialised and shut down around the reading."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML did not initialise: {error}") from error
    try:
        devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            devices.append(
                NvmlDevice(
                    index=index,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    minor=int(nvml.nvmlDeviceGetMinorNumber(handle)),
                    pci_bus_id=proc_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId),
                    memory_mib=int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // MIB,
                )
            )
        return NvmlSystem(
            driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
            cuda_version=_cuda_version(int(nvml.nvmlSystemGetCudaDriverVersion())),
            devices=tuple(devices),
        )
    finally:
        nvml.nvmlShutdown()


class NvmlSampler:
    """Utilisation and memory of devices by UUID, NVML kept initialised between samples (the agent's lifetime)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            self.handles[_text(nvml.nvmlDeviceGetUUID(handle))] = handle

    def sample(self, uuid: str) -> tuple[float, int, int] | None:
        """(GPU utilisation %, memory used MiB, memory free MiB) over NVML's last sample period; None if unreadable."""
        handle = self.handles.get(uuid)
        if handle is None:
            return None
        try:
            rates = self.nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
        except self.nvml.NVMLError:
            return None
        return float(rates.gpu), int(memory.used) // MIB, int(memory.free) // MIB

    def close(self) -> None:
        self.nvml.nvmlShutdown()
