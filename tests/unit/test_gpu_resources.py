"""status.resources and the idle-GPU policy (pure): what a job holds, its GPUs' utilisation written in steps, and
a job failed for idle GPUs only when the operator is told to."""

from __future__ import annotations

import dataclasses
import datetime

from tests.unit.test_planner import NOW, NOW_TEXT, children, make_job, pod, stored
from trainingjob.config import OperatorConfig
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.resources import resources_status

CONFIG = OperatorConfig()
EARLIER = "2026-11-22T11:00:00Z"


def running_job(resources: dict | None = None, **spec: object):
    status = {"phase": "Running", "startTime": EARLIER, **({"resources": resources} if resources else {})}
    return make_job(status, gpuPerWorker=2, **spec)


def placed(job, index: int, node: str = "gpu-1", **fields):
    return pod(job, index, node_name=node, **fields)


def test_a_running_job_shows_its_gpus_nodes_and_average_utilization() -> None:
    job = running_job()
    observed = children(job, placed(job, 0), placed(job, 1, "gpu-2"), gpu_utilization={"job-worker-0": 80.0})
    result = plan(job, observed, NOW, CONFIG)
    assert stored(result)["phase"] == "Running"
    assert stored(result)["resources"] == {"allocatedGPUs": 4, "allocatedNodes": 2, "gpuUtilization": 80.0}


def test_unplaced_and_finished_workers_hold_nothing() -> None:
    job = running_job()
    pods = [pod(job, 0), placed(job, 1, phase="Succeeded")]
    assert resources_status(job, pods, {}, NOW, 5.0) is None


def test_utilization_is_written_only_when_it_moves_by_a_step() -> None:
    job = running_job({"allocatedGPUs": 4, "allocatedNodes": 1, "gpuUtilization": 80.0})
    pods = [placed(job, 0), placed(job, 1)]
    small = resources_status(job, pods, {"job-worker-0": 83.0, "job-worker-1": 84.0}, NOW, 5.0)
    assert small is not None and small["gpuUtilization"] == 80.0  # 83.5 is within the step: no write
    large = resources_status(job, pods, {"job-worker-0": 60.0, "job-worker-1": 70.0}, NOW, 5.0)
    assert large is not None and large["gpuUtilization"] == 65.0
    gone = resources_status(job, pods, {}, NOW, 5.0)
    assert gone is not None and "gpuUtilization" not in gone


def test_idle_gpus_are_marked_but_fail_nothing_by_default() -> None:
    job = running_job()
    observed = children(job, placed(job, 0), placed(job, 1), gpu_utilization={"job-worker-0": 0.0, "job-worker-1": 1.0})
    result = plan(job, observed, NOW, CONFIG)
    assert stored(result)["phase"] == "Running"
    assert stored(result)["resources"]["gpuIdleSince"] == NOW_TEXT
    busy = dataclasses.replace(observed, gpu_utilization={"job-worker-0": 0.0, "job-worker-1": 90.0})
    assert "gpuIdleSince" not in stored(plan(job, busy, NOW, CONFIG))["resources"]


def test_with_an_idle_timeout_a_job_idle_too_long_fails_and_its_workers_go() -> None:
    config = OperatorConfig(idle_gpu_seconds=1800)
    since = {"allocatedGPUs": 4, "allocatedNodes": 1, "gpuUtilization": 0.0, "gpuIdleSince": EARLIER}
    job = running_job(since)
    observed = children(job, placed(job, 0), placed(job, 1), gpu_utilization={"job-worker-0": 0.0, "job-worker-1": 0.0})
    result = plan(job, observed, NOW, config)
    assert stored(result)["phase"] == "Failed"
    failed = next(c for c in stored(result)["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "GPUsIdle" and "1800s" in failed["message"]
    assert [e.reason for e in result.events if e.type == "Warning"] == ["GPUsIdle"]
    assert sorted(a.name for a in result.actions if type(a).__name__ == "DeleteChild") == [
        "job-worker-0",
        "job-worker-1",
    ]


def test_an_idle_job_is_looked_at_again_when_its_timeout_is_due() -> None:
    config = OperatorConfig(idle_gpu_seconds=7200)
    since = {"allocatedGPUs": 4, "allocatedNodes": 1, "gpuUtilization": 0.0, "gpuIdleSince": EARLIER}
    job = running_job(since)
    observed = children(job, placed(job, 0), placed(job, 1), gpu_utilization={"job-worker-0": 0.0, "job-worker-1": 0.0})
    result = plan(job, observed, NOW, config)
    assert stored(result)["phase"] == "Running"
    assert result.requeue_after is not None and result.requeue_after <= 3600
    later = NOW + datetime.timedelta(hours=1)
    assert stored(plan(job, observed, later, config))["phase"] == "Failed"


def test_a_job_that_finishes_holds_nothing_but_keeps_its_last_utilization() -> None:
    job = running_job({"allocatedGPUs": 4, "allocatedNodes": 1, "gpuUtilization": 70.0, "gpuIdleSince": EARLIER})
    observed = children(job, placed(job, 0, phase="Succeeded"), placed(job, 1, phase="Succeeded"))
    result = plan(job, observed, NOW, CONFIG)
    assert stored(result)["phase"] == "Succeeded"
    assert stored(result)["resources"] == {"allocatedGPUs": 0, "allocatedNodes": 0, "gpuUtilization": 70.0}


def test_a_suspended_job_holds_its_gpus_until_its_workers_are_gone() -> None:
    job = running_job({"allocatedGPUs": 4, "allocatedNodes": 1, "gpuUtilization": 70.0}, suspend=True)
    terminating = children(job, placed(job, 0, deleting=True), placed(job, 1, deleting=True))
    assert stored(plan(job, terminating, NOW, CONFIG))["resources"]["allocatedGPUs"] == 4
    gone = plan(job, children(job), NOW, CONFIG)
    assert stored(gone)["phase"] == "Suspended"
    assert stored(gone)["resources"] == {"allocatedGPUs": 0, "allocatedNodes": 0}  # nothing reports: no utilization
