"""What every pod worker of a node shares: settings, API client, managers of sandboxes, volumes, images, venvs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainingjob.node.api import Api
from trainingjob.node.config import NodeConfig
from trainingjob.node.events import EventRecorder
from trainingjob.node.images import ImageCatalog
from trainingjob.node.sandbox import SandboxManager
from trainingjob.node.starter import RuntimeCache
from trainingjob.node.volumes import VolumeManager


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
