"""The Kueue scenario's pure parts (bench/queue_figures.py, bench/kueue.py): GPU occupancy from pod events,
admission times from Workloads, the latency percentiles, the jobs and queue objects it creates, and its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.contenders import Kubeflow, Ours
from bench.kueue import QUEUE, queue_objects, queued_job
from bench.queue_figures import (
    GPU,
    Occupancy,
    QueueTimeline,
    admitted,
    kueue_section,
    owner_job,
    percentile,
    pod_gpus,
    queue_figures,
)
from bench.report import write_report
from trainingjob.api import constants as k


def pod(name: str, phase: str, gpus: int = 1, job: str = "job-0", limit_only: bool = False) -> dict[str, Any]:
    resources = {"limits": {GPU: str(gpus)}} if limit_only else {"requests": {GPU: str(gpus)}}
    return {
        "metadata": {"name": name, "labels": {k.LABEL_JOB_NAME: job}},
        "spec": {"containers": [{"name": "trainer", "resources": resources}, {"name": "sidecar"}]},
        "status": {"phase": phase},
    }


def workload(job: str, is_admitted: bool) -> dict[str, Any]:
    status = "True" if is_admitted else "False"
    return {
        "metadata": {"name": f"wl-{job}", "ownerReferences": [{"name": job, "controller": True}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": status}, {"type": "Admitted", "status": status}]},
    }


def test_pod_gpus_counts_requests_or_a_limit_alone() -> None:
    assert pod_gpus(pod("a", "Running", 2)) == 2
    assert pod_gpus(pod("a", "Running", 3, limit_only=True)) == 3
    assert pod_gpus({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}) == 0


def test_occupancy_holds_from_running_to_the_end_of_each_pod() -> None:
    held = Occupancy()
    held.on_pod("ADDED", pod("a", "Pending"), 0.0)  # not held while Pending
    held.on_pod("MODIFIED", pod("a", "Running"), 2.0)
    held.on_pod("MODIFIED", pod("a", "Running"), 3.0)  # a second Running event does not restart the interval
    held.on_pod("MODIFIED", pod("b", "Running", gpus=2), 4.0)
    held.on_pod("MODIFIED", pod("a", "Succeeded"), 12.0)  # 10 s x 1 GPU
    held.on_pod("DELETED", pod("a", "Succeeded"), 13.0)  # already counted
    assert held.gpu_seconds == 10.0
    assert held.total(until=9.0) == 10.0 + 5.0 * 2  # b still holds its 2 GPUs at the end
    held.on_pod("DELETED", pod("b", "Running", gpus=2), 6.0)  # a deleted Running pod stops holding
    assert held.total(until=100.0) == 14.0


def test_admission_and_owner_of_a_workload() -> None:
    assert admitted(workload("j", True)) and not admitted(workload("j", False))
    assert not admitted({"metadata": {}})
    assert owner_job(workload("j", True)) == "j"
    two = {"metadata": {"ownerReferences": [{"name": "other"}, {"name": "mine", "controller": True}]}}
    assert owner_job(two) == "mine"
    assert owner_job({"metadata": {}}) is None


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.95) is None
    assert percentile([5.0], 0.95) == 5.0
    assert percentile(range(1, 201), 0.95) == 190
    assert percentile([3, 1, 2, 4], 0.5) == 2


def test_queue_figures_from_the_timeline() -> None:
    timeline = QueueTimeline(2, 1, lambda p: (p["metadata"].get("labels") or {}).get(k.LABEL_JOB_NAME))
    timeline.admitted_at = {"job-0": 1.0, "job-1": 10.0, "job-2": 20.0}  # job-2 admitted, never ran
    timeline.pods_running_at = {"job-0": 3.0, "job-1": 11.0}
    timeline.occupancy.gpu_seconds = 40.0
    figures = queue_figures(timeline, gpus=4, until=20.0)
    assert figures["jobs_admitted"] == 3
    assert figures["mean_gpu_occupancy"] == 0.5
    assert figures["admission_to_running_median_s"] == 1.5
    assert figures["admission_to_running_p95_s"] == 2.0
    assert queue_figures(timeline, gpus=4, until=0.0)["mean_gpu_occupancy"] is None


def test_timeline_records_admission_once_and_occupancy_from_its_pods() -> None:
    timeline = QueueTimeline(1, 1, lambda p: (p["metadata"].get("labels") or {}).get(k.LABEL_JOB_NAME))
    timeline.on_workload("ADDED", workload("job-0", False))
    assert timeline.admitted_at == {}
    timeline.on_workload("MODIFIED", workload("job-0", True))
    first = timeline.admitted_at["job-0"]
    timeline.on_workload("MODIFIED", workload("job-0", True))
    assert timeline.admitted_at["job-0"] == first
    timeline.on_pod("MODIFIED", pod("p", "Running"), False)
    unlabelled = {"metadata": {"name": "q"}, "spec": {}, "status": {"phase": "Running"}}
    timeline.on_pod("MODIFIED", unlabelled, False)  # not the workload's: not counted
    assert set(timeline.occupancy.since) == {"p"}
    assert timeline.pods_running_at.keys() == {"job-0"}


def test_queue_objects_give_the_clusterqueue_the_gpus() -> None:
    flavor, cluster_queue, local_queue = queue_objects(64)
    assert flavor["kind"] == "ResourceFlavor" and cluster_queue["kind"] == "ClusterQueue"
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quotas = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert quotas[GPU] == "64" and set(group["coveredResources"]) == set(quotas) == {"cpu", "memory", GPU}
    assert local_queue["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"] == QUEUE
    assert local_queue["metadata"]["namespace"] == "bench"


def test_queued_jobs_carry_the_queue_label_and_one_gpu_per_worker() -> None:
    ours = queued_job(Ours(), "job-00001", 4, "20s")
    assert ours["metadata"]["labels"] == {k.LABEL_KUEUE_QUEUE: QUEUE}
    assert ours["spec"]["workers"] == 4 and ours["spec"]["gpuPerWorker"] == 1
    theirs = queued_job(Kubeflow(tuned=True), "job-00001", 4, "20s")
    assert theirs["metadata"]["labels"] == {k.LABEL_KUEUE_QUEUE: QUEUE}
    replicas = theirs["spec"]["pytorchReplicaSpecs"]
    assert sum(r["replicas"] for r in replicas.values()) == 4
    for replica in replicas.values():
        template = replica["template"]
        assert template["spec"]["containers"][0]["resources"]["requests"] == {GPU: "1"}
        assert template["metadata"]["annotations"]  # kwok's complete-after


def record(contender: str, **figures: Any) -> dict[str, Any]:
    return {
        "kind": "kueue",
        "contender": contender,
        "jobs": 200,
        "workers": 4,
        "gpus": 64,
        "nodes": 8,
        "complete_after": "30s",
        "kueue_version": "v0.17.0",
        "finished": True,
        "drain_s": 400.0,
        "jobs_succeeded": 200,
        "mean_gpu_occupancy": 0.8,
        "admission_to_running_median_s": 1.2,
        "admission_to_running_p95_s": 3.4,
        "writes_per_job": 12.0,
        "writes_per_job_without_events": 9.0,
        "kueue_writes_per_job": 5.0,
        "cpu_seconds": {"operator": 30.0, "kueue": 20.0},
        "operator_peak_rss_mib": 90.0,
        "provenance": {
            **{"commit": "0123456789abcdef", "dirty": False, "load_average": [3.1, 2.9, 2.5]},
            **{"cpu_model": "test CPU", "cpu_count": 2, "memory_gib": 8.0, "date": "2026-11-29T07:00:00+00:00"},
        },
        **figures,
    }


def test_kueue_section_lists_the_latest_run_of_each_contender_ours_first() -> None:
    records = [
        record("kubeflow-tuned", drain_s=500.0),
        record("ours", drain_s=999.0),
        record("ours", finished=False, jobs_succeeded=150),
    ]
    table = kueue_section(records)
    rows = [line for line in table.splitlines() if line.startswith("| trainingjob") or line.startswith("| Kubeflow")]
    assert rows[0].startswith("| trainingjob-operator | 200 x 4 | not finished (150)")
    assert rows[1].startswith("| Kubeflow PyTorchJob (tuned) | 200 x 4 | 500 s | 0.8 | 1.2 s / 3.4 s | 12 (9) | 5 |")
    assert "999" not in table
    assert "Kubeflow PyTorchJob (tuned): commit `0123456789ab`, load average at start [3.1, 2.9, 2.5]" in table
    assert kueue_section([{"kind": "gang"}]) == ""


def test_report_has_the_kueue_table(tmp_path: Path) -> None:
    path = write_report([record("ours")], tmp_path, "# Benchmarks\n")
    assert "## Queued through Kueue" in path.read_text()
