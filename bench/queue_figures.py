"""The Kueue scenario's figures from what the harness's watches saw (pure: no cluster), and its table in the report.

GPU occupancy is counted from the pods, the same way for every contender: each pod holds its GPUs from when the
watch first saw it Running until it left Running (finished or deleted). Admission-to-Running is per job: from when
the watch saw its Workload's `Admitted` condition turn True until all of its pods ran (`Timeline.pods_running_at`),
so it is what the job's controller adds between Kueue's decision and the job's pods on nodes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.observe import Timeline

GPU = "nvidia.com/gpu"
# Who the table names; the raw clients have no job for Kueue to queue, so they are not contenders here.
QUEUE_LABELS = {
    "ours": "trainingjob-operator",
    "kubeflow-default": "Kubeflow PyTorchJob (defaults)",
    "kubeflow-tuned": "Kubeflow PyTorchJob (tuned)",
}


def pod_gpus(pod: dict[str, Any]) -> int:
    """GPUs a pod holds on its node: its containers' requests (a limit alone is its request, as the API server
    defaults it)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(GPU, 0))
        total += int(amount)
    return total


@dataclass
class Occupancy:
    """GPU-seconds held by Running pods: an interval per pod, from Running to its end."""

    since: dict[str, tuple[float, int]] = field(default_factory=dict)
    gpu_seconds: float = 0.0

    def on_pod(self, kind: str, pod: dict[str, Any], at: float) -> None:
        name = pod["metadata"]["name"]
        running = kind != "DELETED" and (pod.get("status") or {}).get("phase") == "Running"
        if running and name not in self.since:
            self.since[name] = (at, pod_gpus(pod))
        elif not running and name in self.since:
            started, gpus = self.since.pop(name)
            self.gpu_seconds += (at - started) * gpus

    def total(self, until: float) -> float:
        """GPU-seconds until `until`, counting pods still Running as holding until then."""
        return self.gpu_seconds + sum(max(0.0, until - started) * gpus for started, gpus in self.since.values())


def admitted(workload: dict[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)


def owner_job(workload: dict[str, Any]) -> str | None:
    """The job a Workload stands for: its controller owner (ours makes the Workload, Kueue makes Kubeflow's)."""
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    return controller.get("name") if controller else None


@dataclass
class QueueTimeline(Timeline):
    """The harness's timeline, plus GPU holdings from the same pod watch and each job's admission time."""

    occupancy: Occupancy = field(default_factory=Occupancy)
    admitted_at: dict[str, float] = field(default_factory=dict)

    def on_pod(self, kind: str, pod: dict[str, Any], jobs_from_pods: bool) -> None:
        super().on_pod(kind, pod, jobs_from_pods)
        if self.job_of_pod(pod) is not None:
            self.occupancy.on_pod(kind, pod, self.now())

    def on_workload(self, kind: str, workload: dict[str, Any]) -> None:
        job = owner_job(workload)
        if job is not None and kind != "DELETED" and admitted(workload):
            self.admitted_at.setdefault(job, self.now())


def percentile(values: Iterable[float], share: float) -> float | None:
    """Nearest-rank percentile (p95 of 200 latencies is the 190th smallest); None of nothing."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def queue_figures(timeline: QueueTimeline, gpus: int, until: float) -> dict[str, Any]:
    """Mean GPU occupancy over [0, until] and admission-to-Running latencies (jobs both admitted and running)."""
    running = timeline.pods_running_at
    latencies = [running[job] - at for job, at in timeline.admitted_at.items() if job in running]
    held = timeline.occupancy.total(until)
    median = statistics.median(latencies) if latencies else None
    p95 = percentile(latencies, 0.95)
    return {
        "jobs_admitted": len(timeline.admitted_at),
        "gpu_seconds_running": round(held, 1),
        "mean_gpu_occupancy": round(held / (gpus * until), 3) if gpus and until > 0 else None,
        "admission_to_running_median_s": round(median, 2) if median is not None else None,
        "admission_to_running_p95_s": round(p95, 2) if p95 is not None else None,
        "admission_to_running_max_s": round(max(latencies), 2) if latencies else None,
    }


def _fmt(value: Any, unit: str = "") -> str:
    return "—" if value is None else f"{value:g}{unit}"


def kueue_section(records: list[dict[str, Any]]) -> str:
    """The report's table: for each shape measured, the latest run of each contender through Kueue."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in (r for r in records if r.get("kind") == "kueue"):
        latest[(r["jobs"], r["workers"], r["gpus"], r["contender"])] = r
    if not latest:
        return ""
    any_run = next(iter(latest.values()))
    lines = [
        "## Queued through Kueue (one ClusterQueue of GPUs)\n\n",
        f"N jobs x W one-GPU workers through one Kueue ClusterQueue (Kueue {any_run.get('kueue_version', '')}) whose "
        f"GPU quota equals the cluster's {any_run['gpus']} kwok GPUs; pods complete {any_run['complete_after']} after "
        "they start; `python -m bench --kueue-jobs N --kueue-workers W --kueue-gpus G` (bench/kueue.py). Ours "
        "creates and owns each job's Workload; Kubeflow's PyTorchJobs go through Kueue's built-in integration "
        "(Kueue suspends them and makes their Workloads). Drain: first create until the last job's status said "
        "Succeeded. Occupancy: GPU-seconds held by Running pods / (GPUs x drain). Admission → Running: from the "
        "Workload's Admitted condition until all the job's pods run (median / p95). Writes per job: the "
        "contender's (without Events), and Kueue's own on its behalf; CPU seconds over the whole run.\n\n",
        "| contender | jobs x workers | drain | mean GPU occupancy | admission → Running (median / p95) "
        "| writes/job (w/o Events) | Kueue writes/job | operator CPU s | Kueue CPU s | operator peak RSS |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n",
    ]
    order = list(QUEUE_LABELS)
    for (jobs, workers, _gpus, name), r in sorted(latest.items(), key=lambda i: (i[0][:3], order.index(i[0][3]))):
        cpu = r.get("cpu_seconds") or {}
        drain = _fmt(r.get("drain_s"), " s") if r.get("finished") else f"not finished ({r.get('jobs_succeeded')})"
        lines.append(
            f"| {QUEUE_LABELS.get(name, name)} | {jobs} x {workers} | {drain} "
            f"| {_fmt(r.get('mean_gpu_occupancy'))} "
            f"| {_fmt(r.get('admission_to_running_median_s'), ' s')} "
            f"/ {_fmt(r.get('admission_to_running_p95_s'), ' s')} "
            f"| {_fmt(r.get('writes_per_job'))} ({_fmt(r.get('writes_per_job_without_events'))}) "
            f"| {_fmt(r.get('kueue_writes_per_job'))} | {_fmt(cpu.get('operator'))} | {_fmt(cpu.get('kueue'))} "
            f"| {_fmt(r.get('operator_peak_rss_mib'), ' MiB')} |\n"
        )
    runs = []
    for (_jobs, _workers, _gpus, name), r in latest.items():
        provenance = r.get("provenance") or {}
        commit = str(provenance.get("commit", "?"))[:12]
        runs.append(f"{QUEUE_LABELS.get(name, name)}: commit `{commit}`, load average at start "
                    f"{provenance.get('load_average')}")  # fmt: skip
    lines.append(f"\nRuns: {'; '.join(runs)}.\n")
    return "".join(lines) + "\n"
