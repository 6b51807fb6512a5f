"""Level-triggered repair and coordinated restarts: drift, deleted pods, scaling, spec changes, quiet status."""

from __future__ import annotations

import time

import pytest

from tests.jobs import (
    create_job,
    env_of,
    get_job,
    job_manifest,
    kubectl,
    live_pods,
    patch_job,
    wait_phase,
)
from tests.kube import Kube, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]


def running_world(kube: Kube, namespace: str, name: str, size: int, attempt: int):
    """All `size` live workers of `attempt` are Running (and nothing else is left)."""
    pods = live_pods(kube, namespace, name)
    ok = len(pods) == size and all(
        p.status.phase == "Running" and p.metadata.labels["ml.example.com/attempt"] == str(attempt) for p in pods
    )
    return pods if ok else None


def test_kubectl_scale_restarts_all_workers_with_the_new_world_size(kube: Kube, namespace: str, cluster) -> None:
    create_job(kube, namespace, job_manifest("elastic", workers=2, complete_after=None))
    wait_phase(kube, namespace, "elastic", "Running")
    kubectl(cluster, "scale", "tj/elastic", "--replicas=4", "-n", namespace)
    restarted = wait_until(lambda: running_world(kube, namespace, "elastic", 4, 1), 90, "4 workers of attempt 1")
    assert [env_of(p)["WORLD_SIZE"] for p in restarted] == ["4"] * 4
    assert [env_of(p)["RESUME_FROM_CHECKPOINT"] for p in restarted] == ["true"] * 4
    job = wait_phase(kube, namespace, "elastic", "Running")
    assert job["status"]["workers"] == 4 and job["status"]["attempt"] == 1
    restarting = next(c for c in job["status"]["conditions"] if c["type"] == "Restarting")
    assert restarting["status"] == "False" and restarting["reason"] == "AllWorkersRunning"


def test_image_change_is_a_coordinated_restart(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("upgrade", workers=2, complete_after=None))
    wait_phase(kube, namespace, "upgrade", "Running")
    patch_job(kube, namespace, "upgrade", {"spec": {"image": "registry.example/train:2"}})
    pods = wait_until(lambda: running_world(kube, namespace, "upgrade", 2, 1), 90, "restarted workers")
    assert {p.spec.containers[0].image for p in pods} == {"registry.example/train:2"}


def test_deleted_worker_pod_is_recreated_as_a_disruption(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("resilient", workers=2, complete_after=None))
    wait_phase(kube, namespace, "resilient", "Running")
    kube.core.delete_namespaced_pod("resilient-worker-1", namespace)
    wait_until(lambda: running_world(kube, namespace, "resilient", 2, 1), 90, "the gang to be recreated")
    status = wait_phase(kube, namespace, "resilient", "Running")["status"]
    assert status["disruptionCount"] == 1 and status["restartCount"] == 0


def test_deleted_service_and_edited_config_map_are_repaired(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("drift", hyperparameters={"lr": 0.5}, complete_after=None))
    wait_phase(kube, namespace, "drift", "Running")
    original = kube.core.read_namespaced_config_map("drift-config", namespace).data
    kube.core.delete_namespaced_service("drift-workers", namespace)
    kube.core.patch_namespaced_config_map("drift-config", namespace, {"data": {"hyperparameters.json": "{}"}})
    wait_until(lambda: _service_exists(kube, namespace, "drift-workers"), 30, "the Service to come back")
    wait_until(
        lambda: kube.core.read_namespaced_config_map("drift-config", namespace).data == original,
        30,
        "the ConfigMap to be restored",
    )
    assert len(live_pods(kube, namespace, "drift")) == 1  # repairs don't disturb the workers


def test_master_port_change_updates_the_service(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("ported", workers=2, complete_after=None))
    wait_phase(kube, namespace, "ported", "Running")
    created = kube.core.read_namespaced_service("ported-workers", namespace)
    patch_job(kube, namespace, "ported", {"spec": {"networking": {"masterPort": 23456}}})

    def ports() -> list[tuple[int, int]] | None:
        service = kube.core.read_namespaced_service("ported-workers", namespace)
        found = [(p.port, int(p.target_port)) for p in service.spec.ports]
        return found if found == [(23456, 23456)] else None

    wait_until(ports, 30, "the Service to follow masterPort")
    service = kube.core.read_namespaced_service("ported-workers", namespace)
    assert service.metadata.uid == created.metadata.uid and service.spec.cluster_ip == "None"  # patched in place
    pods = wait_until(lambda: running_world(kube, namespace, "ported", 2, 1), 90, "workers restarted on the new port")
    assert {p.spec.containers[0].ports[0].container_port for p in pods} == {23456}


def _service_exists(kube: Kube, namespace: str, name: str) -> bool:
    return any(s.metadata.name == name for s in kube.core.list_namespaced_service(namespace).items)


def test_status_is_not_rewritten_when_nothing_changes(kube: Kube, namespace: str) -> None:
    """Once the start has settled, a running job's status stays as it is.

    How long the last events of the start take depends on the machine's load (a worker-details write may follow
    the phase change by a few seconds), so this waits, within a bound, for the first quiet window instead of
    sleeping a fixed time: a status rewritten over and over never gives one.
    """
    create_job(kube, namespace, job_manifest("quiet", workers=2, complete_after=None))
    wait_phase(kube, namespace, "quiet", "Running")

    def quiet_for(seconds: float) -> bool:
        before = get_job(kube, namespace, "quiet")["metadata"]["resourceVersion"]
        time.sleep(seconds)
        return get_job(kube, namespace, "quiet")["metadata"]["resourceVersion"] == before

    wait_until(lambda: quiet_for(5), 60, "the job's status to stay unchanged for 5 s")


def test_terminal_job_ignores_spec_changes(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, job_manifest("final", workers=1, complete_after="1s"))
    done = wait_phase(kube, namespace, "final", "Succeeded")
    patch_job(kube, namespace, "final", {"spec": {"workers": 3}})
    time.sleep(3)
    after = get_job(kube, namespace, "final")
    assert after["status"]["phase"] == "Succeeded"
    assert after["status"]["completionTime"] == done["status"]["completionTime"]
    assert len(live_pods(kube, namespace, "final")) <= 1
