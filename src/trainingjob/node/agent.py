"""The node agent: registration, watches, one worker per pod, the log endpoint and DNS, and restart recovery.

Start-up order matters for recovery: the pods bound to this node are listed first (the pod informer's first
sync); only then is local state whose pod the API no longer has cleaned up (its processes killed, its sandbox
removed), and every listed pod gets a worker that adopts whatever of it still runs. Stopping the agent (SIGTERM)
leaves pods running, as stopping a kubelet does; `tj cluster down` kills them (cleanup.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from trainingjob.node.api.client import Api
from trainingjob.node.api.events import EventRecorder
from trainingjob.node.api.informer import Informer
from trainingjob.node.api.registration import NodeDevices, Registration, machine_resources
from trainingjob.node.cleanup import remove_pod_state
from trainingjob.node.config import NodeConfig
from trainingjob.node.context import NodeContext
from trainingjob.node.devices.advertise import gpu_capacity, gpu_labels
from trainingjob.node.devices.allocator import DeviceAllocator
from trainingjob.node.devices.exporter import GpuExporter
from trainingjob.node.devices.gpus import GpuInventory, GpuModeError, discover
from trainingjob.node.devices.nvml import NvmlSampler, load_nvml
from trainingjob.node.devices.telemetry import GpuTelemetry
from trainingjob.node.images.catalog import ImageCatalog
from trainingjob.node.logs.logserver import LogServer
from trainingjob.node.network import iproute
from trainingjob.node.network.dns import DnsRecords, DnsServer
from trainingjob.node.network.sandbox import SandboxManager
from trainingjob.node.pods.podworker import PodWorker
from trainingjob.node.pods.starter import RuntimeCache
from trainingjob.node.runtime.cgroups import CGROUPS_FILE, Cgroups
from trainingjob.node.volumes.manager import VolumeManager

log = logging.getLogger("trainingjob.node")


def node_gpus(config: NodeConfig) -> GpuInventory:
    try:
        found = discover(config.gpus, config.root, config.name)
    except (GpuModeError, OSError) as error:
        log.error("node %s offers no GPUs: %s", config.name, error)
        return GpuInventory()
    if found.count:
        kind = "FAKE (no CUDA: tests only)" if found.fake else found.product
        log.info("node %s offers %d GPU(s): %s", config.name, found.count, kind)
    return found


def node_cgroups(config: NodeConfig) -> Cgroups:
    """Limits are enforced by cgroups where the node can make them (root, with isolation); said once if not."""
    name = f"{config.cluster}.{config.name}"  # two clusters on one machine both have a tj-local-0
    found = Cgroups.detect(name) if config.isolate else Cgroups(name, None, {}, "pods are not isolated")
    found.record(config.root / CGROUPS_FILE)
    if found.enforced:
        log.info("node %s enforces resource limits with cgroup v%d", config.name, found.version)
    else:
        log.warning("node %s does not enforce resource limits: %s", config.name, found.reason)
    return found


class Agent:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.api = Api(config.credentials)
        self.records = DnsRecords()
        _, allocatable = machine_resources(config.root)
        gpus = node_gpus(config)
        allocatable = {**allocatable, **gpu_capacity(gpus)}
        self.ctx = NodeContext(
            config=config,
            api=self.api,
            sandboxes=SandboxManager(config),
            volumes=VolumeManager(self.api, allocatable, can_mount=config.isolate),
            images=ImageCatalog(Path(config.images_file)),
            runtimes=RuntimeCache(),
            events=EventRecorder(self.api, config.name),
            services=lambda: list(self.records.services.values()),
            allocatable=allocatable,
            cgroups=node_cgroups(config),
            gpus=gpus,
            devices=DeviceAllocator(gpus, config.root / "devices"),
        )
        self.workers: dict[str, PodWorker] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.recovered = False
        self.pods = Informer(self.api, "/api/v1/pods", self.on_pod, "pods", f"spec.nodeName={config.name}")

    # -- pods ----------------------------------------------------------------------------------------------------

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        if not self.recovered:
            return  # the informer's store has it; workers start once recovery has seen the full list
        metadata = pod["metadata"]
        uid, key = metadata["uid"], (metadata["namespace"], metadata["name"])
        if kind == "DELETED":
            worker = self.workers.get(uid)
            if worker is not None:
                worker.deleted()
            return
        previous = self.by_name.get(key)
        if previous is not None and previous != uid and previous in self.workers:
            self.workers[previous].deleted()  # same name, new pod: the old one is gone
        self.by_name[key] = uid
        worker = self.workers.get(uid)
        if worker is None:
            self._start_worker(pod)
        else:
            worker.update(pod)

    def _start_worker(self, pod: dict[str, Any]) -> None:
        worker = PodWorker(self.ctx, pod)
        uid = worker.uid
        self.workers[uid] = worker
        task = asyncio.get_running_loop().create_task(worker.run(), name=f"pod {uid}")
        self.tasks.add(task)

        def finished(done: asyncio.Task[Any]) -> None:
            self.tasks.discard(done)
            self.workers.pop(uid, None)
            metadata = pod["metadata"]
            if self.by_name.get((metadata["namespace"], metadata["name"])) == uid:
                self.by_name.pop((metadata["namespace"], metadata["name"]), None)

        task.add_done_callback(finished)

    async def recover(self) -> None:
        await self.pods.synced.wait()
        known = {pod["metadata"]["uid"] for pod in self.pods.store.values()}
        pods_dir = self.config.pods_dir
        pods_dir.mkdir(parents=True, exist_ok=True)
        for entry in pods_dir.iterdir():
            if entry.is_dir() and entry.name not in known:
                log.info("removing the state of pod %s, which the API no longer has", entry.name)
                remove_pod_state(self.config, entry)
        self.ctx.devices.keep_only(known)
        self.recovered = True
        for pod in list(self.pods.store.values()):
            self.on_pod("ADDED", pod)

    def resolve_log(self, namespace: str, pod: str, container: str, previous: bool) -> Any:
        uid = self.by_name.get((namespace, pod))
        worker = self.workers.get(uid or "")
        if worker is None:
            return 404, f'pod "{pod}" not found on node {self.config.name}'
        slot = next((s for s in worker.slots if s.name == container), None)
        if slot is None:
            return 400, f'container "{container}" in pod "{pod}" is not valid'
        process = slot.process
        if previous:
            from trainingjob.node.runtime.containers import attempts

            runs = attempts(worker.directory / "containers" / container)
            older = [r for r in runs if process is None or r.attempt < process.attempt]
            if not older:
                return 400, f'previous terminated container "{container}" in pod "{pod}" not found'
            return older[-1]
        if process is None or not process.log_path.exists():
            reason = (slot.view.waiting or ("ContainerCreating", None))[0]
            return 400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}'
        return process

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def _spawn(self, coroutine: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self, stop: asyncio.Event) -> None:
        config = self.config
        if config.isolate and config.pod_network is not None:
            iproute.ensure_bridge(config.pod_network, [config.index])
        logs = LogServer(config, self.api, self.resolve_log)
        await logs.start(config.node_ip)
        dns = None
        if config.isolate:
            dns = DnsServer(self.records, config.node_ip)
            await dns.start()
        gpus = self.ctx.gpus
        registration = Registration(self.api, config, NodeDevices(gpu_capacity(gpus), gpu_labels(gpus)))
        self._spawn(registration.run(), "registration")
        exporter = await self._start_gpu_exporter()
        services = Informer(self.api, "/api/v1/services", self._on_service, "services")
        slices = Informer(self.api, "/apis/discovery.k8s.io/v1/endpointslices", self.records.on_slice, "endpointslices")
        for informer in (services, slices, self.pods):
            self._spawn(informer.run(), informer.what)
        self._spawn(self.recover(), "recovery")
        log.info("node agent %s serving logs on %s:%d", config.name, config.node_ip, config.port)
        await stop.wait()
        log.info("node agent %s stopping (pods keep running)", config.name)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await logs.stop()
        if exporter is not None:
            await exporter.stop()
        if dns is not None:
            await dns.stop()
        await self.api.close()

    async def _start_gpu_exporter(self) -> GpuExporter | None:
        gpus = self.ctx.gpus
        if not gpus.count:
            return None
        sampler = None
        if not gpus.fake:
            try:
                sampler = NvmlSampler(load_nvml())
            except Exception as error:
                log.warning("node %s cannot sample its GPUs: %s", self.config.name, error)
        telemetry = GpuTelemetry(gpus, self.ctx.devices, self.container_lookup, sampler)
        exporter = GpuExporter(
            self.api, telemetry, gpus, self.config.name, self.config.node_ip, self.config.gpu_metrics_port
        )
        await exporter.start()
        self._spawn(exporter.run(), "gpu-exporter")
        return exporter

    def container_lookup(self, uid: str, container: str) -> tuple[str, str, list[str]] | None:
        """(namespace, pod, current cgroup directories) of a container on this node, for GPU telemetry."""
        worker = self.workers.get(uid)
        slot = next((s for s in worker.slots if s.name == container), None) if worker is not None else None
        if worker is None or slot is None:
            return None
        metadata = worker.pod["metadata"]
        dirs = slot.process.cgroup_dirs() if slot.process is not None and slot.running else []
        return metadata["namespace"], metadata["name"], dirs

    def _on_service(self, kind: str, service: dict[str, Any]) -> None:
        self.records.on_service(kind, service)


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2 or args[0] != "--config":
        sys.exit("usage: python -m trainingjob.node --config <nodes/NAME/config.json>")
    config = NodeConfig.load(Path(args[1]))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        await Agent(config).run(stop)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
