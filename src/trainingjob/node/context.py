"""What every pod worker of a node shares: settings, API client, managers of sandboxes, volumes, images, venvs,
the node's cgroups and GPUs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainingjob.node.api.client import Api
from trainingjob.node.api.events import EventRecorder
from trainingjob.node.config import NodeConfig
from trainingjob.node.devices.allocator import DeviceAllocator
from trainingjob.node.devices.gpus import GpuInventory
from trainingjob.node.images.catalog import ImageCatalog
from trainingjob.node.network.sandbox import SandboxManager
from trainingjob.node.pods.starter import RuntimeCache
from trainingjob.node.runtime.cgroups import Cgroups
from trainingjob.node.volumes.manager import VolumeManager


@dataclass
class NodeContext:
    config: NodeConfig
    api: Api
    sandboxes: SandboxManager
    volumes: VolumeManager
    images: ImageCatalog
    runtimes: RuntimeCache
    events: EventRecorder
    services: Callable[[], Iterable[dict[str, Any]]]
    allocatable: dict[str, str]
    cgroups: Cgroups
    gpus: GpuInventory
    devices: DeviceAllocator
