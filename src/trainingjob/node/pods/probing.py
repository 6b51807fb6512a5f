"""A pod worker's probes: one prober per running container attempt, and what its results do to the pod.

Readiness sets the container's ready flag (the pod's Ready condition, and through it the Service's EndpointSlices,
follow at the next status write); a failed startup or liveness probe kills the container with the probe's grace
period (else the pod's), and the pod's restartPolicy restarts it like any exit. Events are the kubelet's: Unhealthy
for each failed run ("Liveness probe failed: ..."), Killing when a probe has the container killed.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from trainingjob.node.api.registration import epoch
from trainingjob.node.context import NodeContext
from trainingjob.node.network.sandbox import Sandbox
from trainingjob.node.pods.slots import Slot
from trainingjob.node.pods.starter import StartError
from trainingjob.node.probes.prober import ContainerProber, ProbeTarget
from trainingjob.node.probes.spec import ProbeSpec, ProbeSpecError, container_probes
from trainingjob.node.runtime.containers import ContainerProcess

DEFAULT_GRACE_SECONDS = 30.0


def probes_of(container: dict[str, Any]) -> dict[str, ProbeSpec]:
    """The container's probes; one this node cannot run stops the container from starting, with the reason."""
    try:
        return container_probes(container)
    except (ProbeSpecError, KeyError, ValueError) as error:
        raise StartError("CreateContainerError", f"invalid probe: {error}") from error


class SlotListener:
    """Applies one attempt's probe results to its slot; results of an attempt that is no longer current are
    dropped."""

    def __init__(self, worker: PodProbing, slot: Slot, process: ContainerProcess) -> None:
        self.worker = worker
        self.slot = slot
        self.process = process

    def current(self) -> bool:
        return self.slot.process is self.process and not self.worker.terminating

    def probe_failed(self, kind: str, message: str) -> None:
        if self.current():
            self.worker.ctx.events.pod_event(
                self.worker.pod, "Unhealthy", f"{kind.capitalize()} probe failed: {message}", True, self.slot.name
            )

    def probe_changed(self, kind: str, result: bool) -> None:
        if not self.current():
            return
        view = self.slot.view
        if kind == "readiness":
            view.probe_ready = result
        elif kind == "startup" and result:
            view.probe_started = True
        elif not result:
            self.worker.kill_for_probe(self.slot, self.process, self.slot.probes[kind])
        self.worker.wake.set()


class PodProbing:
    """The probing part of a pod worker (podworker.PodWorker)."""

    ctx: NodeContext
    pod: dict[str, Any]
    sandbox: Sandbox | None
    terminating: bool
    wake: asyncio.Event

    def prepare_probes(self, slot: Slot) -> None:
        """Before an attempt starts: its probes, and the flags they hold back until they succeed."""
        slot.probes = probes_of(slot.container)
        slot.view.probe_started = "startup" not in slot.probes
        slot.view.probe_ready = "readiness" not in slot.probes

    def start_prober(self, slot: Slot, process: ContainerProcess, resume: dict[str, Any] | None = None) -> None:
        """Probe a running attempt; `resume`: its container status in the API (an adopted container keeps its
        ready and started flags rather than flapping them)."""
        self.stop_prober(slot)
        if not slot.probes or self.sandbox is None or slot.view.running_since is None:
            return
        initial = {}
        if resume is not None:
            initial = {"startup": bool(resume.get("started")), "readiness": bool(resume.get("ready"))}
            slot.view.probe_started = "startup" not in slot.probes or initial["startup"]
            slot.view.probe_ready = "readiness" not in slot.probes or initial["readiness"]
        target = ProbeTarget(self.sandbox.ip, process.directory, self.ctx.config.kubernetes_version)
        prober = ContainerProber(
            slot.probes, target, SlotListener(self, slot, process), epoch(slot.view.running_since), initial
        )
        slot.prober = asyncio.get_running_loop().create_task(prober.run(), name=f"probes {slot.name}")

    def stop_prober(self, slot: Slot) -> None:
        if slot.prober is not None:
            slot.prober.cancel()
            slot.prober = None

    def kill_for_probe(self, slot: Slot, process: ContainerProcess, probe: ProbeSpec) -> None:
        message = f"Container {slot.name} failed {probe.kind} probe, will be restarted"
        self.ctx.events.pod_event(self.pod, "Killing", message, container=slot.name)
        grace = probe.termination_grace
        if grace is None:
            grace = float(self.pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS))
        slot.kill_task = asyncio.get_running_loop().create_task(self._kill(slot, process, grace))

    async def _kill(self, slot: Slot, process: ContainerProcess, grace: float) -> None:
        """SIGTERM, then SIGKILL after `grace` if the attempt still runs."""
        process.signal(signal.SIGTERM)
        if slot.exit_task is not None:
            await asyncio.wait([slot.exit_task], timeout=grace)
        if slot.process is process and slot.running:
            process.signal(signal.SIGKILL)
