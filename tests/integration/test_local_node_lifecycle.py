"""A pod's life on a local node: graceful deletion, restart policies, init containers, activeDeadlineSeconds."""

from __future__ import annotations

import threading
import time

import pytest
from kubernetes import watch

from tests.kube import Kube, wait_until
from tests.local_node import container_state, local_pod, pod_status, python_container, wait_for_phase

pytestmark = pytest.mark.integration

GRACEFUL = """
import signal, sys, time
def stop(*_):
    print("got SIGTERM, saving a checkpoint", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("training", flush=True)
time.sleep(300)
"""

# PID 1 forks a helper into its own process group (as a DataLoader does) that has no SIGTERM handler of its own.
FORKING = """
import os, signal, sys, time
helper = os.fork()
if helper == 0:
    time.sleep(300)
    os._exit(0)
def stop(*_):
    alive = os.waitpid(helper, os.WNOHANG) == (0, 0)
    print("helper alive at SIGTERM" if alive else "helper already gone", flush=True)
    os.kill(helper, signal.SIGKILL)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("training", flush=True)
time.sleep(300)
"""


class PodRecorder:
    """Every state of one pod seen through a watch, until it is deleted (or the time runs out)."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.states: list[dict] = []
        self.deleted_at: float | None = None
        self._thread = threading.Thread(target=self._run, args=(kube, namespace, name), daemon=True)
        self._thread.start()

    def _run(self, kube: Kube, namespace: str, name: str) -> None:
        stream = watch.Watch()
        for event in stream.stream(
            kube.core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}", timeout_seconds=120
        ):
            if event["type"] == "DELETED":
                self.deleted_at = time.monotonic()
                stream.stop()
                return
            self.states.append(kube.api.sanitize_for_serialization(event["object"]))

    def wait_deleted(self, timeout: float) -> float:
        self._thread.join(timeout)
        assert self.deleted_at is not None, "the pod was not deleted"
        return self.deleted_at

    @property
    def last_status(self) -> dict:
        return self.states[-1]["status"]


def start_running(kube: Kube, namespace: str, pod: dict) -> None:
    kube.core.create_namespaced_pod(namespace, pod)
    name = pod["metadata"]["name"]
    wait_for_phase(kube, namespace, name, ("Running",))
    wait_until(lambda: "training" in _log(kube, namespace, name), 60, "the pod to print its first line")


def _log(kube: Kube, namespace: str, name: str) -> str:
    return kube.core.read_namespaced_pod_log(name, namespace, container="main", _preload_content=False).data.decode()


def test_deletion_sends_sigterm_and_the_pod_goes_once_the_process_exits(kube: Kube, namespace: str) -> None:
    start_running(kube, namespace, local_pod("graceful", python_container(GRACEFUL), terminationGracePeriodSeconds=60))
    follow = kube.core.read_namespaced_pod_log(
        "graceful", namespace, container="main", follow=True, _preload_content=False
    )
    recorder = PodRecorder(kube, namespace, "graceful")
    requested = time.monotonic()
    kube.core.delete_namespaced_pod("graceful", namespace)
    gone = recorder.wait_deleted(90)
    assert gone - requested < 30, "the pod waited for its grace period although its process had exited"
    streamed = follow.read().decode()
    assert streamed.splitlines() == ["training", "got SIGTERM, saving a checkpoint"]
    terminated = container_state(recorder.last_status)["terminated"]
    assert terminated["exitCode"] == 0 and recorder.last_status["phase"] == "Succeeded"


def test_sigterm_goes_to_pid_1_alone_as_a_container_runtime_sends_it(kube: Kube, namespace: str) -> None:
    """A process PID 1 forked is PID 1's to stop: had SIGTERM reached it too, it would have died (no handler, not
    PID 1) while PID 1 was still saving its checkpoint."""
    start_running(kube, namespace, local_pod("forking", python_container(FORKING), terminationGracePeriodSeconds=60))
    follow = kube.core.read_namespaced_pod_log(
        "forking", namespace, container="main", follow=True, _preload_content=False
    )
    recorder = PodRecorder(kube, namespace, "forking")
    kube.core.delete_namespaced_pod("forking", namespace)
    recorder.wait_deleted(90)
    assert follow.read().decode().splitlines() == ["training", "helper alive at SIGTERM"]


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(kube: Kube, namespace: str) -> None:
    # PID 1 of its namespace without a SIGTERM handler ignores SIGTERM, as in any container.
    script = "import time; print('training', flush=True); time.sleep(300)"
    start_running(kube, namespace, local_pod("stubborn", python_container(script), terminationGracePeriodSeconds=4))
    recorder = PodRecorder(kube, namespace, "stubborn")
    requested = time.monotonic()
    kube.core.delete_namespaced_pod("stubborn", namespace)
    gone = recorder.wait_deleted(90)
    assert gone - requested >= 4
    terminated = container_state(recorder.last_status)["terminated"]
    assert terminated["exitCode"] == 137 and recorder.last_status["phase"] == "Failed"


def test_on_failure_restarts_the_container_and_keeps_its_last_state(kube: Kube, namespace: str) -> None:
    script = """
import os, sys
marker = "/state/attempted"
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(3)
print("second attempt succeeded")
"""
    container = python_container(script, volumeMounts=[{"name": "state", "mountPath": "/state"}])
    pod = local_pod("flaky", container, restartPolicy="OnFailure", volumes=[{"name": "state", "emptyDir": {}}])
    kube.core.create_namespaced_pod(namespace, pod)
    status = wait_for_phase(kube, namespace, "flaky", ("Succeeded", "Failed"))
    assert status["phase"] == "Succeeded"
    entry = status["containerStatuses"][0]
    assert entry["restartCount"] == 1
    assert entry["lastState"]["terminated"]["exitCode"] == 3
    assert entry["state"]["terminated"]["exitCode"] == 0
    assert _log(kube, namespace, "flaky") == "second attempt succeeded\n"
    previous = kube.core.read_namespaced_pod_log("flaky", namespace, previous=True, _preload_content=False)
    assert previous.data.decode() == ""


def test_always_restarts_even_a_successful_container_with_back_off(kube: Kube, namespace: str) -> None:
    pod = local_pod("looping", python_container("print('tick')"), restartPolicy="Always")
    kube.core.create_namespaced_pod(namespace, pod)

    def restarted_and_backing_off() -> dict | None:
        status = pod_status(kube, namespace, "looping")
        entry = (status.get("containerStatuses") or [{}])[0]
        waiting = (entry.get("state") or {}).get("waiting") or {}
        return status if entry.get("restartCount", 0) >= 1 and waiting.get("reason") == "CrashLoopBackOff" else None

    status = wait_until(restarted_and_backing_off, 90, "a restart, then CrashLoopBackOff")
    assert status["phase"] == "Running"
    assert status["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "Completed"


def test_a_failed_init_container_fails_a_never_restarting_pod(kube: Kube, namespace: str) -> None:
    init = python_container("import sys; sys.exit(5)", name="prepare")
    pod = local_pod("badinit", python_container("print('never runs')"), initContainers=[init])
    kube.core.create_namespaced_pod(namespace, pod)
    status = wait_for_phase(kube, namespace, "badinit", ("Failed",))
    assert container_state(status, "prepare")["terminated"]["exitCode"] == 5
    assert container_state(status, "main")["waiting"]["reason"] == "PodInitializing"
    initialized = next(c for c in status["conditions"] if c["type"] == "Initialized")
    assert initialized["status"] == "False" and "prepare" in initialized["message"]


def test_active_deadline_fails_the_pod(kube: Kube, namespace: str) -> None:
    script = "import time; time.sleep(300)"
    pod = local_pod("deadline", python_container(script), activeDeadlineSeconds=3, terminationGracePeriodSeconds=2)
    kube.core.create_namespaced_pod(namespace, pod)
    status = wait_for_phase(kube, namespace, "deadline", ("Failed",), timeout=60)
    assert status["reason"] == "DeadlineExceeded"
    assert status["message"] == "Pod was active on the node longer than the specified deadline"
    assert container_state(status)["terminated"]["exitCode"] == 137
