"""How a pod ends on this node: stopping its containers, tearing its sandbox down, the final status and DELETE.

A pod whose GPUs the node cannot assign at admission fails (UnexpectedAdmissionError); a pod's devices go back
when it is torn down. Deletion, as the kubelet does it: SIGTERM to each container (its PID 1), up to the grace
period (shortened if the pod is deleted again with a shorter one), SIGKILL, sandbox and memory volumes torn down,
final status (every container terminated; the pod Succeeded or Failed), then the DELETE with gracePeriodSeconds 0
and the pod's uid as precondition in the body, which is what finally removes it from the API.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Any

from trainingjob.kube.phases import PodPhase
from trainingjob.node.api.client import ApiError
from trainingjob.node.api.registration import now
from trainingjob.node.context import NodeContext
from trainingjob.node.devices.allocator import AdmissionError
from trainingjob.node.network.sandbox import Sandbox
from trainingjob.node.pods.slots import Slot, unknown_termination
from trainingjob.node.pods.status import PodFacts, pod_phase, pod_status
from trainingjob.node.runtime.security import format_pod
from trainingjob.node.volumes.manager import HostVolume

log = logging.getLogger(__name__)
RETRY_SECONDS = 5.0
KILL_WAIT_SECONDS = 15.0


class PodEnding:
    """The ending half of a pod worker (podworker.PodWorker runs the pod; this stops and reports it)."""

    ctx: NodeContext
    pod: dict[str, Any]
    uid: str
    directory: Path
    slots: list[Slot]
    sandbox: Sandbox | None
    volumes: dict[str, HostVolume] | None
    start_time: str | None
    gone: bool
    finished: bool
    terminating: bool
    deleted_from_api: bool
    forced: tuple[str, str | None, str | None] | None
    retry_at: float | None
    published: dict[str, Any] | None
    wake: asyncio.Event

    def _grace(self) -> float:
        metadata = self.pod["metadata"]
        grace = metadata.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30)
        return float(grace)

    def _phase(self) -> str:
        init = [s.view for s in self.slots if s.init]
        app = [s.view for s in self.slots if not s.init]
        return pod_phase(self.pod["spec"], init, app)

    def _finish(self) -> None:
        self.finished = True
        for slot in self.slots:
            slot.restart_at = slot.retry_at = None
        self._teardown()

    def _teardown(self) -> None:
        self.ctx.volumes.teardown(self.uid, self.directory)
        self.ctx.sandboxes.teardown(self.uid, self.directory)
        self.ctx.cgroups.remove_pod(self.uid)
        self.ctx.devices.release_pod(self.uid)
        self.volumes = None

    def _admit(self) -> bool:
        """Devices for the pod's containers, as the kubelet admits a pod; one that cannot have them fails."""
        try:
            self.ctx.devices.admit(self.pod)
        except AdmissionError as error:
            self.forced = (PodPhase.FAILED, error.reason, str(error))
            self.ctx.events.pod_event(self.pod, error.reason, str(error), True)
            self._finish()
            return False
        return True

    async def _stop_all(self, grace: float) -> None:
        """SIGTERM every running container, SIGKILL what still runs after `grace` (shortened by a new delete)."""
        running = [s for s in self.slots if s.running and s.process is not None]
        if not running:
            return
        for slot in running:
            assert slot.process is not None
            slot.process.signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        began = loop.time()
        while any(s.running for s in running) and not self.gone:
            remaining = began + min(grace, self._grace() if self.terminating else grace) - loop.time()
            if remaining <= 0:
                break
            waiter = loop.create_task(self.wake.wait())
            pending = [s.exit_task for s in running if s.running and s.exit_task is not None]
            await asyncio.wait([*pending, waiter], timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            self.wake.clear()
        for slot in running:
            if slot.running and slot.process is not None:
                slot.process.signal(signal.SIGKILL)
        tasks = [s.exit_task for s in running if s.exit_task is not None]
        await asyncio.wait(tasks, timeout=KILL_WAIT_SECONDS)

    async def _terminate(self) -> None:
        if not self.terminating:
            self.terminating = True
            for slot in self.slots:
                if slot.running:
                    self.ctx.events.pod_event(
                        self.pod, "Killing", f"Stopping container {slot.name}", container=slot.name
                    )
            await self._stop_all(self._grace())
            for slot in self.slots:
                if slot.view.terminated is None and not slot.running:
                    slot.view.set_terminated(unknown_termination())
            app = [s.view for s in self.slots if not s.init]
            ok = all(v.terminated is not None and v.terminated.exit_code == 0 for v in app)
            if not self.finished:
                self.forced = self.forced or (PodPhase.SUCCEEDED if ok else PodPhase.FAILED, None, None)
            self._finish()
            await self._publish()
        if not self.deleted_from_api:
            await self._final_delete()

    async def _final_delete(self) -> None:
        metadata = self.pod["metadata"]
        path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        try:
            await self.ctx.api.delete(path, body)
        except ApiError as error:
            if error.status not in (404, 409):
                self.retry_at = time.time() + RETRY_SECONDS
                return
        self.deleted_from_api = True

    async def _publish(self) -> None:
        if self.gone:
            return
        init = [s.view for s in self.slots if s.init]
        app = [s.view for s in self.slots if not s.init]
        current = self.pod.get("status") or {}
        phase, reason, message = self.forced or (None, None, None)
        facts = PodFacts(
            host_ip=self.ctx.config.node_ip,
            pod_ip=self.sandbox.ip if self.sandbox else current.get("podIP"),
            start_time=self.start_time,
            sandbox_ready=self.sandbox is not None and not self.finished,
            reason=reason,
            message=message,
            phase=phase,
        )
        status = pod_status(self.pod, init, app, facts, now())
        if status == self.published:
            return
        metadata = self.pod["metadata"]
        try:
            updated = await self.ctx.api.patch(
                f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}/status", {"status": status}
            )
        except ApiError as error:
            if error.status != 404:
                log.warning("status of pod %s not written: %s", format_pod(self.pod), error)
                self.retry_at = time.time() + RETRY_SECONDS
            return
        if updated.get("metadata", {}).get("uid") == self.uid:
            self.pod = updated
        self.published = status
