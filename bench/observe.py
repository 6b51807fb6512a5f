"""The harness's view of a run: when each job's pods appeared, when it was Running, when it Succeeded.

Times are seconds since the workload started, taken when the harness's own watch delivered the change, so every
contender is timed by the same clock and the same watch latency. A job counts as Running when its controller says
so in the job's status (what a user sees); for the raw client, which has no job object, when all its pods run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JobOfPod = Callable[[dict[str, Any]], str | None]
JobState = Callable[[dict[str, Any]], str | None]


@dataclass
class Timeline:
    jobs: int
    workers: int
    job_of_pod: JobOfPod
    started: float = field(default_factory=time.monotonic)
    pods_of_job: dict[str, set[str]] = field(default_factory=dict)
    pod_phases: dict[str, str] = field(default_factory=dict)
    pods_created_at: dict[str, float] = field(default_factory=dict)
    pods_running_at: dict[str, float] = field(default_factory=dict)
    running_at: dict[str, float] = field(default_factory=dict)
    succeeded_at: dict[str, float] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    # Each job's state as its controller's status last said (the Watchdog compares it with a LIST's).
    job_states: dict[str, str] = field(default_factory=dict)
    # A pod's address, and how often a pod's address changed while it lived: kwok's running stage, played again
    # from a stale view of the pod, gives the pod a new address from its pool (a kubelet never does). The
    # operator publishes the new address in the job's EndpointSlice: that write is the simulation's, not the job's.
    pod_ips: dict[str, str] = field(default_factory=dict)
    pod_ip_changes: int = 0
    # Every pod event of the workload and when the last came: the steady state's idle window starts once the pods
    # have been quiet a while (kwok may still be playing stages from a stale view after all jobs are Running).
    pod_events: int = 0
    last_pod_event: float = field(default_factory=time.monotonic)
    # The newest resourceVersion each watch ("pod", "job") delivered: how far it has got (the Watchdog's LISTs).
    watched_versions: dict[str, int] = field(default_factory=lambda: {"pod": 0, "job": 0})

    def start(self) -> None:
        self.started = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last pod event of the workload."""
        return time.monotonic() - self.last_pod_event

    def now(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def on_pod(self, kind: str, pod: dict[str, Any], jobs_from_pods: bool) -> None:
        self._watched("pod", pod)
        job = self.job_of_pod(pod)
        if job is None or kind == "DELETED":
            return
        self.pod_events += 1
        self.last_pod_event = time.monotonic()
        name = pod["metadata"]["name"]
        pods = self.pods_of_job.setdefault(job, set())
        if name not in pods:
            pods.add(name)
            if len(pods) == self.workers:
                self.pods_created_at.setdefault(job, self.now())
        status = pod.get("status") or {}
        self.pod_phases[name] = status.get("phase", "Pending")
        self._note_address(name, status.get("podIP"))
        self._job_from_pods(job, pods, jobs_from_pods)

    def _note_address(self, pod: str, address: str | None) -> None:
        if not address:
            return
        before = self.pod_ips.get(pod)
        if before is not None and before != address:
            self.pod_ip_changes += 1
        self.pod_ips[pod] = address

    def _job_from_pods(self, job: str, pods: set[str], jobs_from_pods: bool) -> None:
        """All W pods running is timed for every contender alike; it is the job's state only for raw pods."""
        if len(pods) < self.workers:
            return
        phases = [self.pod_phases.get(name) for name in pods]
        if all(phase in ("Running", "Succeeded") for phase in phases):
            self.pods_running_at.setdefault(job, self.now())
        if not jobs_from_pods:
            return
        if job in self.pods_running_at:
            self.mark(job, "Running")
        if all(phase == "Succeeded" for phase in phases):
            self.mark(job, "Succeeded")
        if any(phase == "Failed" for phase in phases):
            self.mark(job, "Failed")

    def on_job(self, job_state: JobState, kind: str, obj: dict[str, Any]) -> None:
        self._watched("job", obj)
        state = job_state(obj)
        if state is not None and kind != "DELETED":
            self.job_states[obj["metadata"]["name"]] = state
            self.mark(obj["metadata"]["name"], state)

    def mark(self, job: str, state: str) -> None:
        at = self.now()
        if state in ("Running", "Succeeded"):
            self.running_at.setdefault(job, at)  # a job seen Succeeded first was Running in between
        if state == "Succeeded":
            self.succeeded_at.setdefault(job, at)
        if state == "Failed":
            self.failed.add(job)

    def _watched(self, stream: str, obj: dict[str, Any]) -> None:
        version = resource_version(obj)
        if version > self.watched_versions[stream]:
            self.watched_versions[stream] = version

    def seen_states(self) -> dict[str, str]:
        """What the watch delivered, named as `listed_states` names a LIST: pod/<name> -> phase, job/<name> -> state."""
        return {
            **{f"pod/{name}": phase for name, phase in self.pod_phases.items()},
            **{f"job/{name}": state for name, state in self.job_states.items()},
        }

    def progress(self) -> tuple[int, int, int, int]:
        """What grows while a workload progresses: pod events, jobs with a state, jobs Running, jobs Succeeded."""
        return (self.pod_events, len(self.job_states), len(self.running_at), len(self.succeeded_at))

    def running_now(self) -> int:
        """Jobs started and not yet finished (for the plot of jobs Running over time)."""
        return len(self.running_at) - len(self.succeeded_at) - len(self.failed - self.succeeded_at.keys())

    def all(self, state: str) -> bool:
        marks = {
            "Created": self.pods_created_at,
            "PodsRunning": self.pods_running_at,
            "Running": self.running_at,
            "Succeeded": self.succeeded_at,
        }
        return len(marks[state]) >= self.jobs

    def listed_states(
        self, pods: list[dict[str, Any]], jobs: list[dict[str, Any]], job_state: JobState | None
    ) -> dict[str, tuple[str, int]]:
        """A LIST's pods (of the workload) and job objects in `seen_states`' terms, each with its resourceVersion."""
        states = {
            f"pod/{pod['metadata']['name']}": ((pod.get("status") or {}).get("phase", "Pending"), resource_version(pod))
            for pod in pods
            if self.job_of_pod(pod) is not None
        }
        for job in jobs if job_state is not None else []:
            state = job_state(job)
            if state is not None:
                states[f"job/{job['metadata']['name']}"] = (state, resource_version(job))
        return states

    def last(self, marks: dict[str, float]) -> float | None:
        return max(marks.values()) if len(marks) >= self.jobs else None

    def summary(self) -> dict[str, Any]:
        return {
            "all_pods_created_s": self.last(self.pods_created_at),
            "all_pods_running_s": self.last(self.pods_running_at),
            "all_running_s": self.last(self.running_at),
            "all_succeeded_s": self.last(self.succeeded_at),
            "jobs_running": len(self.running_at),
            "jobs_succeeded": len(self.succeeded_at),
            "jobs_failed": len(self.failed),
            "pods_seen": len(self.pod_phases),
            "pod_ip_changes": self.pod_ip_changes,
        }


def resource_version(obj: dict[str, Any]) -> int:
    """An object's resourceVersion as an integer (an etcd revision here); 0 where it has none."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0
