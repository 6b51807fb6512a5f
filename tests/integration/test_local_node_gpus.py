"""GPUs on a local process node, in the labelled fake mode (the test cluster's nodes have `fake:2`): the node
advertises `nvidia.com/gpu` and feature-discovery labels, two 1-GPU workers get different devices (their variables and
the one device node each sees in its /dev), a third 1-GPU worker waits Pending because the scheduler counts the
node's capacity, and it gets a device once the first job's pods are gone; the node's GPU telemetry reaches the
job's status.resources and trainingjob_gpu_utilization_percent through the operator's scrape of its exporter.
The fake devices go through the same admission, assignment, environment and mount path real ones do
(src/trainingjob/node/devices/)."""

from __future__ import annotations

import copy
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from tests.jobs import create_job, delete_job, get_job, job_manifest, job_pods, wait_phase
from tests.kube import Kube, wait_until
from tests.local_node import LOCAL_NODE_SELECTOR, LOCAL_NODE_TOLERATION, RESTRICTED_CONTAINER, STDLIB_IMAGE, pod_log
from tests.operator_harness import REPO, RunningOperator

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("operator")]

NODE = "tj-local-0"
SHOW_DEVICES = """
import os, time
print("NVIDIA_VISIBLE_DEVICES=" + os.environ.get("NVIDIA_VISIBLE_DEVICES", ""), flush=True)
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
print("dev=" + ",".join(sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))), flush=True)
time.sleep(3600)
"""


def gpu_job(name: str, workers: int) -> dict[str, Any]:
    placement = {"nodeSelector": {**LOCAL_NODE_SELECTOR, "kubernetes.io/hostname": NODE}}
    return job_manifest(
        name,
        workers=workers,
        complete_after=None,
        image=STDLIB_IMAGE,
        command=["python3", "-u", "-c", SHOW_DEVICES],
        gpuPerWorker=1,
        securityContext=copy.deepcopy(RESTRICTED_CONTAINER),
        scheduling={**placement, "tolerations": [LOCAL_NODE_TOLERATION]},
    )


def devices_seen(kube: Kube, namespace: str, pod: str) -> dict[str, str] | None:
    lines = pod_log(kube, namespace, pod, container="trainer").splitlines()
    seen = dict(line.split("=", 1) for line in lines if "=" in line)
    return seen if {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "dev"} <= seen.keys() else None


def test_the_node_advertises_its_fake_gpus_as_a_device_plugin_and_gpu_feature_discovery_do(kube: Kube) -> None:
    node = kube.core.read_node(NODE)
    assert node.status.capacity["nvidia.com/gpu"] == node.status.allocatable["nvidia.com/gpu"] == "2"
    labels = node.metadata.labels
    assert labels["nvidia.com/gpu.present"] == "true" and labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.product"] == "TrainingJob-Fake-GPU"
    assert labels["ml.example.com/fake-gpus"] == "true"


def test_two_workers_get_different_gpus_and_a_third_waits_for_the_capacity(kube: Kube, namespace: str) -> None:
    create_job(kube, namespace, gpu_job("pair", 2))
    wait_phase(kube, namespace, "pair", "Running", timeout=120)
    seen = [
        wait_until(lambda p=p: devices_seen(kube, namespace, p), 60, f"{p}'s devices")
        for p in (
            "pair-worker-0",
            "pair-worker-1",
        )
    ]
    first, second = (s["NVIDIA_VISIBLE_DEVICES"] for s in seen)
    assert first.startswith("GPU-") and second.startswith("GPU-") and first != second, seen
    for entry in seen:
        assert entry["CUDA_VISIBLE_DEVICES"] == entry["NVIDIA_VISIBLE_DEVICES"]
        device, control = entry["dev"].split(",")
        assert device.startswith("nvidia") and device[len("nvidia") :].isdigit() and control == "nvidiactl", entry
    assert seen[0]["dev"] != seen[1]["dev"]

    create_job(kube, namespace, gpu_job("third", 1))

    def unschedulable() -> str | None:
        pods = job_pods(kube, namespace, "third")
        conditions = (pods[0].status.conditions or []) if pods else []
        scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
        return scheduled.message if scheduled is not None and scheduled.reason == "Unschedulable" else None

    message = wait_until(unschedulable, 90, "the third worker to be unschedulable")
    assert "Insufficient nvidia.com/gpu" in message, message
    assert job_pods(kube, namespace, "third")[0].status.phase == "Pending"

    delete_job(kube, namespace, "pair")
    wait_phase(kube, namespace, "third", "Running", timeout=180)
    released = wait_until(lambda: devices_seen(kube, namespace, "third-worker-0"), 60, "the third worker's devices")
    assert released["NVIDIA_VISIBLE_DEVICES"] in (first, second), released


def test_the_gpu_checks_node_steps_hold_on_fake_devices() -> None:
    """scripts/gpu-check.sh's first half with `--fake 2`: assignment, release, exposition, and a container started
    through the node's shim that sees only its device (the same steps a GPU machine runs on NVML's devices)."""
    result = subprocess.run(
        [sys.executable, "-m", "trainingjob.node.devices.check", "--fake", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[gpu-check] only the assigned device is visible: yes" in result.stdout
    assert "UnexpectedAdmissionError" in result.stdout


BUSY_WORKER = """
import time
print("busy", flush=True)
while True:
    pass
"""


def metric_lines(operator: RunningOperator, name: str) -> list[str]:
    with urllib.request.urlopen(f"{operator.metrics_url}/metrics", timeout=10) as response:
        return [line for line in response.read().decode().splitlines() if line.startswith(name + "{")]


def test_gpu_telemetry_reaches_the_jobs_status_and_metrics(
    kube: Kube, namespace: str, operator: RunningOperator
) -> None:
    """Fake mode: fake telemetry is the container's CPU use (labelled fake), so a worker busy on its CPU reads above
    0 % (near 100 % on an idle machine; less on a loaded one), as the node's DCGM-style exporter reports it and the
    operator scrapes it. A sleeping worker would read 0."""
    manifest = gpu_job("busy", 1)
    manifest["spec"].update(command=["python3", "-u", "-c", BUSY_WORKER], resources={"limits": {"cpu": "1"}})
    create_job(kube, namespace, manifest)
    wait_phase(kube, namespace, "busy", "Running", timeout=120)

    def busy_status() -> dict[str, Any] | None:
        resources = ((get_job(kube, namespace, "busy") or {}).get("status") or {}).get("resources") or {}
        return resources if resources.get("gpuUtilization", 0) > 0 else None

    resources = wait_until(busy_status, 120, "the job's GPU utilization in status")
    assert (resources["allocatedGPUs"], resources["allocatedNodes"]) == (1, 1), resources
    series = wait_until(
        lambda: [
            line
            for line in metric_lines(operator, "trainingjob_gpu_utilization_percent")
            if f'namespace="{namespace}"' in line
        ],
        60,
        "the gauge",
    )
    (line,) = series
    assert 'trainingjob="busy"' in line and 'worker="0"' in line, line
    assert 0 < float(line.rsplit(" ", 1)[1]) <= 100, line
