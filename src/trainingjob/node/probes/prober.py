"""The probes of one container attempt, run as the kubelet's prober workers run them, until the attempt ends.

The startup probe runs first and alone; once it has succeeded, liveness and readiness run side by side, each every
`periodSeconds` after `initialDelaySeconds` from the container's start. Every failed run is reported (the Unhealthy
event); a result that flips is reported too, and the listener acts on it: readiness sets the container's ready
flag, a startup or liveness probe that has failed `failureThreshold` times in a row has the container killed (then
restarted by the pod's restartPolicy), and its loop ends there.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainingjob.node.probes.handlers import exec_command, http_get, tcp_socket
from trainingjob.node.probes.spec import ProbeCounter, ProbeSpec


@dataclass(frozen=True)
class ProbeTarget:
    """Where the probes of one attempt go: the pod's IP, the attempt's directory (exec), the node's version."""

    pod_ip: str
    attempt_dir: Path
    kube_version: str


class ProbeListener(Protocol):
    def probe_failed(self, kind: str, message: str) -> None: ...

    def probe_changed(self, kind: str, result: bool) -> None: ...


async def run_probe(spec: ProbeSpec, target: ProbeTarget) -> tuple[bool, str]:
    handler = spec.handler
    if handler.kind == "httpGet":
        return await http_get(handler, target.pod_ip, spec.timeout, target.kube_version)
    if handler.kind == "tcpSocket":
        return await tcp_socket(handler, target.pod_ip, spec.timeout)
    return await exec_command(handler, target.attempt_dir, spec.timeout)


class ContainerProber:
    def __init__(
        self,
        probes: dict[str, ProbeSpec],
        target: ProbeTarget,
        listener: ProbeListener,
        started_at: float,
        initial: dict[str, bool] | None = None,
    ) -> None:
        """`started_at`: the container's start (time.time()); `initial`: results to resume from (an agent that
        restarted while the container ran keeps its ready and started flags instead of flapping them)."""
        self.probes = probes
        self.target = target
        self.listener = listener
        self.started_at = started_at
        self.initial = initial or {}

    def _counter(self, spec: ProbeSpec) -> ProbeCounter:
        counter = ProbeCounter.start(spec)
        if spec.kind in self.initial:
            counter.result = self.initial[spec.kind]
        return counter

    async def run(self) -> None:
        startup = self.probes.get("startup")
        if startup is not None and not await self._loop(startup):
            return
        loops = [self._loop(self.probes[kind]) for kind in ("liveness", "readiness") if kind in self.probes]
        await asyncio.gather(*loops)

    async def _loop(self, spec: ProbeSpec) -> bool:
        """Probe until the result decides this loop: startup succeeded (True), startup or liveness failed (False);
        readiness probes until cancelled."""
        counter = self._counter(spec)
        if spec.kind == "startup" and counter.result:
            return True
        await asyncio.sleep(max(0.0, self.started_at + spec.initial_delay - time.time()))
        while True:
            ok, message = await run_probe(spec, self.target)
            if not ok:
                self.listener.probe_failed(spec.kind, message)
            if counter.record(ok):
                self.listener.probe_changed(spec.kind, bool(counter.result))
                if spec.kind == "startup" and counter.result:
                    return True
                if spec.kind != "readiness" and counter.result is False:
                    return False
            await asyncio.sleep(spec.period)
