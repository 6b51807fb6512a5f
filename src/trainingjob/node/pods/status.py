"""Pod status as the kubelet reports it (pure): container states, phase, conditions.

Phase follows the kubelet's getPhase: Failed when an init container failed under restartPolicy Never; Pending
while initializing or a container waits for its first start; Running while any container runs (or will be
restarted); Succeeded/Failed once all have terminated for good. Conditions: PodScheduled (kept from the
scheduler), PodReadyToStartContainers (the sandbox exists), Initialized, ContainersReady and Ready (every container
running, started by its startup probe if it has one, and ready by its readiness probe if it has one);
lastTransitionTime changes only when a condition's status does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainingjob.kube.phases import POD_FINISHED, PodPhase

OUR_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


@dataclass
class Termination:
    exit_code: int
    reason: str
    finished_at: str
    started_at: str | None = None
    message: str | None = None
    signal: int | None = None
    container_id: str | None = None

    def to_api(self) -> dict[str, Any]:
        state: dict[str, Any] = {"exitCode": self.exit_code, "reason": self.reason, "finishedAt": self.finished_at}
        optional = {
            "startedAt": self.started_at,
            "message": self.message,
            "signal": self.signal,
            "containerID": self.container_id,
        }
        state.update({k: v for k, v in optional.items() if v is not None})
        return state


@dataclass
class ContainerView:
    """What the node knows of one container: exactly one of waiting, running_since and terminated is set."""

    name: str
    image: str
    image_id: str = ""
    container_id: str | None = None
    restart_count: int = 0
    waiting: tuple[str, str | None] | None = ("ContainerCreating", None)
    running_since: str | None = None
    terminated: Termination | None = None
    last_termination: Termination | None = field(default=None)
    # Probe results of the current attempt (True where the container has no such probe): probes/prober.py.
    probe_started: bool = True
    probe_ready: bool = True

    @property
    def started(self) -> bool:
        return self.running_since is not None and self.probe_started

    @property
    def ready(self) -> bool:
        return self.started and self.probe_ready

    def set_waiting(self, reason: str, message: str | None = None) -> None:
        self.waiting, self.running_since, self.terminated = (reason, message), None, None

    def set_running(self, since: str, container_id: str) -> None:
        self.waiting, self.running_since, self.terminated = None, since, None
        self.container_id = container_id

    def set_terminated(self, termination: Termination) -> None:
        self.waiting, self.running_since, self.terminated = None, None, termination

    def state(self) -> dict[str, Any]:
        if self.running_since is not None:
            return {"running": {"startedAt": self.running_since}}
        if self.terminated is not None:
            return {"terminated": self.terminated.to_api()}
        reason, message = self.waiting or ("ContainerCreating", None)
        return {"waiting": {"reason": reason, **({"message": message} if message else {})}}

    def to_api(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "name": self.name,
            "state": self.state(),
            "lastState": {"terminated": self.last_termination.to_api()} if self.last_termination else {},
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.image,
            "imageID": self.image_id,
            "started": self.started,
        }
        if self.container_id:
            status["containerID"] = self.container_id
        return status


def pod_phase(spec: dict[str, Any], init: list[ContainerView], app: list[ContainerView]) -> str:
    pending_init = failed_init = 0
    for view in init:
        if view.running_since is not None:
            pending_init += 1
        elif view.terminated is not None:
            failed_init += view.terminated.exit_code != 0
        elif view.last_termination is not None:
            failed_init += view.last_termination.exit_code != 0
        else:
            pending_init += 1
    running = waiting = stopped = succeeded = 0
    for view in app:
        if view.running_since is not None:
            running += 1
        elif view.terminated is not None:
            stopped += 1
            succeeded += view.terminated.exit_code == 0
        elif view.last_termination is not None:
            stopped += 1
        else:
            waiting += 1
    policy = spec.get("restartPolicy") or "Always"
    if failed_init and policy == "Never":
        return PodPhase.FAILED
    if pending_init or waiting:
        return PodPhase.PENDING
    if running:
        return PodPhase.RUNNING
    if stopped:
        if policy == "Always":
            return PodPhase.RUNNING
        if stopped == succeeded:
            return PodPhase.SUCCEEDED
        return PodPhase.FAILED if policy == "Never" else PodPhase.RUNNING
    return PodPhase.PENDING


def _condition(kind: str, ok: bool, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def pod_conditions(phase: str, sandbox_ready: bool, init: list[ContainerView], app: list[ContainerView]) -> list[dict]:
    finished = phase in POD_FINISHED
    not_initialized = [v.name for v in init if not (v.terminated and v.terminated.exit_code == 0)]
    unready = [v.name for v in app if not v.ready]
    incomplete = ("ContainersNotInitialized", f"containers with incomplete status: [{' '.join(not_initialized)}]")
    if phase == PodPhase.SUCCEEDED:
        initialized = _condition("Initialized", True, "PodCompleted")
    else:
        initialized = _condition("Initialized", not not_initialized, *(incomplete if not_initialized else ()))
    if finished:
        ready = [_condition(kind, False, "PodCompleted") for kind in ("ContainersReady", "Ready")]
    else:
        message = f"containers with unready status: [{' '.join(unready)}]"
        reason = ("ContainersNotReady", message) if unready else ()
        ready = [_condition(kind, not unready, *reason) for kind in ("ContainersReady", "Ready")]
    return [_condition("PodReadyToStartContainers", sandbox_ready), initialized, *ready]


def with_transition_times(conditions: list[dict], previous: list[dict], now: str) -> list[dict]:
    """Keep each condition's lastTransitionTime unless its status changed."""
    before = {c["type"]: c for c in previous}
    for condition in conditions:
        old = before.get(condition["type"])
        same = old is not None and old.get("status") == condition["status"] and old.get("lastTransitionTime")
        condition["lastTransitionTime"] = old["lastTransitionTime"] if same else now
    return conditions


@dataclass
class PodFacts:
    """What the node adds to the containers' views: addresses, start time, sandbox, a pod-level failure."""

    host_ip: str
    pod_ip: str | None
    start_time: str | None
    sandbox_ready: bool
    reason: str | None = None
    message: str | None = None
    phase: str | None = None  # forced (DeadlineExceeded, node shutdown); else computed


def pod_status(
    pod: dict[str, Any], init: list[ContainerView], app: list[ContainerView], facts: PodFacts, now: str
) -> dict[str, Any]:
    current = pod.get("status") or {}
    phase = facts.phase or pod_phase(pod["spec"], init, app)
    ours = pod_conditions(phase, facts.sandbox_ready, init, app)
    previous = current.get("conditions") or []
    others = [c for c in previous if c["type"] not in OUR_CONDITIONS]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": others + with_transition_times(ours, previous, now),
        "hostIP": facts.host_ip,
        "hostIPs": [{"ip": facts.host_ip}],
        "containerStatuses": [v.to_api() for v in app],
    }
    if init:
        status["initContainerStatuses"] = [v.to_api() for v in init]
    if facts.pod_ip:
        status.update(podIP=facts.pod_ip, podIPs=[{"ip": facts.pod_ip}])
    if facts.start_time:
        status["startTime"] = facts.start_time
    if facts.reason:
        status.update(reason=facts.reason, message=facts.message or "")
    return status
