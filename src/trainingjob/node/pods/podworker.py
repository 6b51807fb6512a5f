"""One pod on this node, driven to what its spec asks (the kubelet's pod worker), one sync at a time.

Each sync is level-triggered: from the latest pod object and what the node's disk says, it takes the next steps
(sandbox, volumes, init containers in order, then the app containers, restarts by restartPolicy with back-off)
and writes the status if it changed. It runs on every watch event for the pod, every container exit and every
timer it set (back-off, retries, token refresh, activeDeadlineSeconds). How a pod ends (deletion, the final
status write) is in podending.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from typing import Any

from trainingjob.kube.phases import POD_FINISHED, PodPhase
from trainingjob.node.api.client import ApiError
from trainingjob.node.api.registration import epoch, now
from trainingjob.node.context import NodeContext
from trainingjob.node.env.serviceenv import pod_service_env
from trainingjob.node.network.sandbox import Sandbox, SandboxError
from trainingjob.node.pods.podending import RETRY_SECONDS, PodEnding
from trainingjob.node.pods.probing import PodProbing, probes_of
from trainingjob.node.pods.slots import (
    Slot,
    api_container_status,
    api_restart_count,
    container_id,
    record_lost,
    termination_of,
    unknown_termination,
)
from trainingjob.node.pods.starter import (
    StartError,
    StillPreparing,
    build_launch,
    confine,
    fetch_env_sources,
    lookup_image,
)
from trainingjob.node.pods.status import ContainerView
from trainingjob.node.runtime import cgroups
from trainingjob.node.runtime.containers import ContainerProcess, attempts, prune_attempts
from trainingjob.node.runtime.launch import write_json
from trainingjob.node.runtime.security import format_pod
from trainingjob.node.volumes.manager import HostVolume, VolumeError

log = logging.getLogger(__name__)
START_RETRY_MAX = 300.0
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def should_restart(policy: str, exit_code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


class PodWorker(PodEnding, PodProbing):
    def __init__(self, ctx: NodeContext, pod: dict[str, Any]) -> None:
        self.ctx = ctx
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.directory = ctx.config.pods_dir / self.uid
        self.gone = False
        self.wake = asyncio.Event()
        self.wake.set()
        spec = pod["spec"]
        has_init = bool(spec.get("initContainers"))
        self.slots = [self._slot(c, True, "PodInitializing") for c in spec.get("initContainers") or []]
        self.slots += [
            self._slot(c, False, "PodInitializing" if has_init else "ContainerCreating") for c in spec["containers"]
        ]
        self.sandbox: Sandbox | None = None
        self.volumes: dict[str, HostVolume] | None = None
        self.start_time: str | None = (pod.get("status") or {}).get("startTime")
        self.finished = False
        self.terminating = False
        self.deleted_from_api = False
        self.forced: tuple[str, str | None, str | None] | None = None
        self.retry_at: float | None = None
        self.published: dict[str, Any] | None = None
        self.restore()

    def _slot(self, container: dict[str, Any], init: bool, waiting: str) -> Slot:
        return Slot(
            container, init, ContainerView(container["name"], container.get("image", ""), waiting=(waiting, None))
        )

    @property
    def policy(self) -> str:
        return self.pod["spec"].get("restartPolicy") or "Always"

    # ---------------------------------------------------------------------------------------------------------
    # Recovery after an agent restart

    def restore(self) -> None:
        """Rebuild the slots from the pod's directory (and from the API's status where the directory is gone)."""
        if self.directory.is_dir():
            self.sandbox = self.ctx.sandboxes.load(self.pod, self.directory)
        for slot in self.slots:
            runs = attempts(self.directory / "containers" / slot.name)
            if not runs:
                count, started = api_restart_count(self.pod, slot.name)
                if started:
                    slot.view.restart_count = count
                    slot.view.set_terminated(unknown_termination())
                continue
            current = runs[-1]
            slot.view.restart_count = current.attempt
            if len(runs) > 1 and (previous := runs[-2].exited()):
                slot.view.last_termination = termination_of(slot, runs[-2], previous)
            self._adopt(slot, current)
        phase = (self.pod.get("status") or {}).get("phase")
        if phase in POD_FINISHED and not any(s.running for s in self.slots):
            self.finished = True
            self._teardown()  # in case the previous agent died between the final status and the teardown

    def _adopt(self, slot: Slot, process: ContainerProcess) -> None:
        slot.process = process
        record = process.exited()
        started = process.started()
        if record is None and started is not None and process.container_alive():
            slot.view.set_running(started["startedAt"], container_id(process))
            slot.view.image_id = (process.shim() or {}).get("imageID", "")
            self._watch(slot)
            with contextlib.suppress(StartError):
                slot.probes = probes_of(slot.container)
                self.start_prober(slot, process, api_container_status(self.pod, slot.name))
            return
        if record is None and process.shim_alive():
            self._watch(slot)
            return
        if record is None:
            record = record_lost(process)
        slot.view.set_terminated(termination_of(slot, process, record))

    # ---------------------------------------------------------------------------------------------------------
    # Events

    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        self.wake.set()

    def deleted(self) -> None:
        self.gone = True
        self.wake.set()

    def _watch(self, slot: Slot) -> None:
        process = slot.process
        assert process is not None

        async def wait() -> None:
            if slot.view.running_since is None:
                started = await process.wait_started()
                if started is not None and slot.process is process:
                    slot.view.set_running(started["startedAt"], container_id(process))
                    self.ctx.events.pod_event(
                        self.pod, "Started", f"Started container {slot.name}", container=slot.name
                    )
                    self.start_prober(slot, process)
                    self.wake.set()
            await process.wait_exit()
            if slot.process is process:
                self.stop_prober(slot)
            cgroups.remove_dirs(process.cgroup_dirs())
            record = process.exited() or record_lost(process)
            if slot.process is process:
                slot.view.set_terminated(termination_of(slot, process, record))
                if record.get("reason") == "StartError":
                    self.ctx.events.pod_event(self.pod, "Failed", f"Error: {record.get('message')}", True, slot.name)
            self.wake.set()

        slot.exit_task = asyncio.get_running_loop().create_task(wait())

    # ---------------------------------------------------------------------------------------------------------
    # The loop

    def _next_delay(self) -> float | None:
        moments = [self.retry_at, *(s.restart_at for s in self.slots), *(s.retry_at for s in self.slots)]
        if not self.finished and not self.terminating:
            moments.append(self.ctx.volumes.token_refresh.get(self.uid))
            moments.append(self._deadline())
        pending = [m for m in moments if m is not None]
        return max(0.0, min(pending) - time.time()) if pending else None

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self._next_delay())
            self.wake.clear()
            try:
                if await self.sync():
                    return
            except Exception:
                log.exception("sync of pod %s failed", format_pod(self.pod))
                self.retry_at = time.time() + RETRY_SECONDS

    async def sync(self) -> bool:
        """One pass; True when the pod is gone from the API and from this node."""
        if self.gone:
            await self._stop_all(0)
            self._teardown()
            shutil.rmtree(self.directory, ignore_errors=True)
            self.ctx.events.forget(self.uid)
            return True
        if self.pod["metadata"].get("deletionTimestamp"):
            await self._terminate()
            return False
        if self.finished:
            return False
        self.retry_at = None
        if (deadline := self._deadline()) is not None and time.time() >= deadline:
            await self._stop_all(self._grace())
            self.forced = (PodPhase.FAILED, "DeadlineExceeded", DEADLINE_MESSAGE)
            self._finish()
            await self._publish()
            return False
        if self.start_time is None:
            self.start_time = now()
            self.directory.mkdir(parents=True, exist_ok=True)
            write_json(self.directory / "pod.json", {k: self.pod["metadata"][k] for k in ("namespace", "name", "uid")})
        if not self._admit():
            await self._publish()
            return False
        if await self._prepare():
            await self._run_containers()
            if not any(s.running for s in self.slots) and self._phase() in POD_FINISHED:
                self._finish()
        await self._publish()
        return False

    def _deadline(self) -> float | None:
        seconds = self.pod["spec"].get("activeDeadlineSeconds")
        if seconds is None or not self.start_time:
            return None
        return epoch(self.start_time) + float(seconds)

    async def _prepare(self) -> bool:
        """Sandbox and volumes; False (with a retry set) while they cannot be made."""
        try:
            if self.sandbox is None:
                self.sandbox = self.ctx.sandboxes.create(self.pod, self.directory)
            if self.volumes is None:
                self.volumes = await self.ctx.volumes.prepare(self.pod, self.directory)
            refresh = self.ctx.volumes.token_refresh.get(self.uid)
            if refresh is not None and time.time() >= refresh:
                await self.ctx.volumes.refresh_tokens(self.pod, self.directory)
        except SandboxError as error:
            self.ctx.events.pod_event(
                self.pod, "FailedCreatePodSandBox", f"Failed to create pod sandbox: {error}", True
            )
            self.retry_at = time.time() + RETRY_SECONDS
            return False
        except (VolumeError, ApiError) as error:
            self.ctx.events.pod_event(self.pod, "FailedMount", f"MountVolume.SetUp failed: {error}", True)
            self.retry_at = time.time() + RETRY_SECONDS
            return False
        return True

    async def _run_containers(self) -> None:
        for slot in (s for s in self.slots if s.init):
            view = slot.view
            if view.terminated is not None and view.terminated.exit_code == 0:
                continue
            if slot.running:
                return
            if view.terminated is not None or slot.restart_at is not None:
                if self.policy != "Never":
                    await self._restart_when_due(slot)
                return
            await self._start(slot)
            return
        for slot in (s for s in self.slots if not s.init):
            view = slot.view
            if slot.running:
                continue
            if view.terminated is not None:
                if should_restart(self.policy, view.terminated.exit_code):
                    await self._restart_when_due(slot)
                continue
            if slot.restart_at is not None:
                await self._restart_when_due(slot)
                continue
            await self._start(slot)

    async def _restart_when_due(self, slot: Slot) -> None:
        if slot.restart_at is None:
            ended = slot.view.terminated
            ran = 0.0
            if ended is not None and ended.started_at:
                ran = time.time() - epoch(ended.started_at)
            delay = slot.next_backoff(ran)
            slot.restart_at = time.time() + delay
            if ended is not None:
                slot.view.last_termination = ended
        if time.time() < slot.restart_at:
            delay = round(slot.restart_at - time.time())
            slot.view.set_waiting(
                "CrashLoopBackOff",
                f"back-off {max(delay, 1)}s restarting failed container={slot.name} pod={format_pod(self.pod)}",
            )
            self.ctx.events.pod_event(self.pod, "BackOff", "Back-off restarting failed container", True, slot.name)
            return
        slot.restart_at = None
        await self._start(slot)

    async def _start(self, slot: Slot) -> None:
        if slot.retry_at is not None and time.time() < slot.retry_at:
            return
        slot.retry_at = None
        assert self.sandbox is not None and self.volumes is not None
        container = slot.container
        try:
            image = lookup_image(self.ctx.images, container)
            runtime = self.ctx.runtimes.request(image, self.wake.set)
            sources = await fetch_env_sources(self.ctx.api, self.pod["metadata"]["namespace"], container)
            service_env = pod_service_env(
                self.pod, self.ctx.services(), self.ctx.config.apiserver_host, self.ctx.config.apiserver_port
            )
            attempt = slot.next_attempt()
            process = ContainerProcess(self.directory / "containers" / slot.name / str(attempt))
            prepared = build_launch(
                self._with_addresses(),
                container,
                image=image,
                runtime=runtime,
                sources=sources,
                service_env=service_env,
                allocatable=self.ctx.allocatable,
                sandbox=self.sandbox,
                volumes=self.volumes,
                isolate=self.ctx.config.isolate,
                pod_dir=self.directory,
                attempt_dir=process.directory,
            )
            confine(prepared.spec, self.ctx, self.uid, container, attempt)
            self.prepare_probes(slot)
        except StillPreparing:
            slot.view.set_waiting("ContainerCreating")
            self.ctx.events.pod_event(
                self.pod,
                "Pulling",
                f'Building the local runtime of image "{container.get("image")}"',
                container=slot.name,
            )
            return
        except StartError as error:
            self._start_failed(slot, error)
            return
        slot.start_failures = 0
        self.ctx.events.pod_event(
            self.pod,
            "Pulled",
            f'Container image "{container.get("image")}" is mapped to local runtime {runtime.key}',
            container=slot.name,
        )
        process.start(prepared.spec)
        prune_attempts(self.directory / "containers" / slot.name, keep_from=attempt - 1)
        write_json(process.directory / "shim.json", {**(process.shim() or {}), "imageID": prepared.image_id})
        slot.process = process
        slot.view.restart_count = attempt
        slot.view.image_id = prepared.image_id
        self.ctx.events.pod_event(self.pod, "Created", f"Created container {slot.name}", container=slot.name)
        slot.view.set_waiting("ContainerCreating")
        self._watch(slot)

    def _with_addresses(self) -> dict[str, Any]:
        """The pod as the downward API must see it: with the addresses this node gave it, which its status in the
        API may not show yet (the kubelet resolves status.podIP from the sandbox too)."""
        assert self.sandbox is not None
        host, ip = self.ctx.config.node_ip, self.sandbox.ip
        addresses = {"podIP": ip, "podIPs": [{"ip": ip}], "hostIP": host, "hostIPs": [{"ip": host}]}
        return {**self.pod, "status": {**(self.pod.get("status") or {}), **addresses}}

    def _start_failed(self, slot: Slot, error: StartError) -> None:
        slot.start_failures += 1
        delay = min(START_RETRY_MAX, 10.0 * 2 ** (slot.start_failures - 1))
        slot.retry_at = time.time() + delay
        slot.view.set_waiting(error.reason, error.message)
        if error.reason == "ErrImagePull":
            self.ctx.events.pod_event(
                self.pod,
                "Failed",
                f'Failed to pull image "{slot.container.get("image")}": {error.message}',
                True,
                slot.name,
            )
        self.ctx.events.pod_event(self.pod, "Failed", f"Error: {error.reason}", True, slot.name)
