"""The gang scenario: GPU jobs asking for twice the cluster's GPUs, with native gang scheduling on and off.

What it shows: how many GPU-seconds workers hold while their job cannot run (some of its workers bound, not all:
a real distributed job would sit in its rendezvous, and two such jobs can deadlock), and what gangs cost the
operator (writes per job: one gang object created and one deleted; CPU; time until every job finished). kwok
completes each pod `complete_after` after it starts whatever its peers do, so without gangs the jobs still end
here: the waste shows as held GPU-seconds, not as a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.client import create_all
from bench.cluster import NAMESPACE, BenchCluster
from bench.contender_base import CREATE_CONCURRENCY, Contender
from bench.contenders import Ours, contender
from bench.guard import WaitLimits
from bench.measure import CpuMeter, peak_rss_mib
from bench.observe import Timeline
from bench.run import follow, guard, identities, request_figures, teardown, utcnow, wait_until
from trainingjob.api import constants as k

CONTENDER = "ours"


@dataclass
class Holdings:
    """Which pods of each job are bound and unfinished, and the GPU-seconds held by jobs bound only in part."""

    workers: int
    bound: dict[str, set[str]] = field(default_factory=dict)
    partial_gpu_seconds: float = 0.0
    most_partial_jobs: int = 0
    last_sample: float | None = None

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        job = (pod["metadata"].get("labels") or {}).get(k.LABEL_JOB_NAME)
        if job is None:
            return
        name, phase = pod["metadata"]["name"], (pod.get("status") or {}).get("phase")
        holding = kind != "DELETED" and (pod.get("spec") or {}).get("nodeName") and phase in ("Pending", "Running")
        pods = self.bound.setdefault(job, set())
        if holding:
            pods.add(name)
        else:
            pods.discard(name)

    def sample(self) -> None:
        now = time.monotonic()
        partial = [len(pods) for pods in self.bound.values() if 0 < len(pods) < self.workers]
        if self.last_sample is not None:
            self.partial_gpu_seconds += sum(partial) * (now - self.last_sample)
        self.last_sample = now
        self.most_partial_jobs = max(self.most_partial_jobs, len(partial))


async def watch_holdings(cluster: BenchCluster, holdings: Holdings) -> None:
    async for kind, pod in cluster.admin.watch(f"/api/v1/namespaces/{NAMESPACE}/pods"):
        holdings.on_pod(kind, pod)


def broken(who: Contender, watches: list[asyncio.Task]) -> BaseException | None:
    """Why the gang run can no longer finish: our operator exited, or one of the harness's watches ended."""
    exited = who.exit_report()
    if exited is not None:
        return RuntimeError(exited)
    if any(task.done() for task in watches):
        return RuntimeError("the harness's watch of pods and jobs stopped")
    return None


def gpu_job(name: str, workers: int, complete_after: str) -> dict[str, Any]:
    manifest = Ours.manifest(name, workers, complete_after)
    manifest["spec"]["gpuPerWorker"] = 1
    return manifest


async def gang_run(
    gang: bool, jobs: int, workers: int, nodes: int, complete_after: str, limits: WaitLimits, say: Callable[[str], None]
) -> dict[str, Any]:
    """`jobs` x `workers` one-GPU workers on `nodes` 8-GPU nodes, followed until every job Succeeded."""
    cluster = BenchCluster.up(nodes, identities(), say=say, gang_scheduling=gang)
    who = contender(CONTENDER)
    tasks: list[asyncio.Task] = []
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        await asyncio.to_thread(who.install, cluster)
        timeline, holdings = Timeline(jobs, workers, who.job_of_pod), Holdings(workers)
        meter = CpuMeter({**cluster.component_pids(), "operator": who.pid})
        synced = asyncio.Event()
        tasks += [
            asyncio.create_task(follow(cluster, who, timeline, synced)),
            asyncio.create_task(watch_holdings(cluster, holdings)),
        ]
        await synced.wait()
        began = utcnow()
        meter.start()
        timeline.start()
        say(f"  gang scheduling {'on' if gang else 'off'}: submitting {jobs} x {workers} GPU workers")
        requests = [(who.job_path, gpu_job(f"job-{i:05d}", workers, complete_after)) for i in range(jobs)]
        await create_all(cluster.admin, requests, CREATE_CONCURRENCY)
        watchdog = guard(cluster, who, timeline, lambda: broken(who, tasks), limits)
        finished = await wait_until(
            lambda: timeline.all("Succeeded"), limits.within_s, holdings.sample, watchdog.expecting(timeline.progress)
        )
        ended = utcnow()
        cpu = meter.stop()
        peak = peak_rss_mib(who.pid) if who.pid else None
        record = {
            "kind": "gang",
            "contender": CONTENDER,
            "gang_scheduling": gang,
            "jobs": jobs,
            "workers": workers,
            "nodes": nodes,
            "gpus": nodes * 8,
            "complete_after": complete_after,
            "finished": finished,
            **timeline.summary(),
            "partial_gpu_seconds": round(holdings.partial_gpu_seconds, 1),
            "most_jobs_bound_in_part": holdings.most_partial_jobs,
            "cpu_seconds": cpu,
            "operator_peak_rss_mib": round(peak, 1) if peak else None,
        }
        record.update(request_figures(cluster, who, began, ended, jobs))
        return record
    finally:
        await teardown(cluster, who, *tasks)


def gang_section(records: list[dict[str, Any]]) -> str:
    """The report's table: for each shape measured (jobs x workers on GPUs), the latest run with gangs on and off."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in (r for r in records if r.get("kind") == "gang"):
        latest[(r["jobs"], r["workers"], r["gpus"], r["gang_scheduling"])] = r
    if not latest:
        return ""
    any_run = next(iter(latest.values()))
    lines = [
        "## Gang scheduling (GPUs oversubscribed)\n\n",
        f"One-GPU workers on {any_run['gpus']} GPUs ({any_run['nodes']} kwok nodes), pods complete "
        f"{any_run['complete_after']} after they start; `python -m bench --gang-jobs N --gang-workers W` "
        "(bench/gang.py). GPU-seconds held in part: GPUs bound to unfinished workers of jobs not all bound, summed "
        "over time — what a real distributed job would waste waiting for its missing workers (or deadlock on). "
        "When the GPUs are a multiple of the job size, one-by-one placement rarely splits a job and gangs have "
        "little to win; a job size that does not divide them shows the difference.\n\n",
        "| jobs x workers | gang scheduling | all Succeeded | GPU-seconds held in part | most jobs bound in part "
        "| writes/job (no events) | operator CPU s |\n|---|---|---|---|---|---|---|\n",
    ]
    for (jobs, workers, _gpus, gang), r in sorted(latest.items(), key=lambda item: (item[0][:3], not item[0][3])):
        operator_cpu = (r.get("cpu_seconds") or {}).get("operator")
        lines.append(
            f"| {jobs} x {workers} | {'on (native Workload API)' if gang else 'off'} | {r['all_succeeded_s']} s | "
            f"{r['partial_gpu_seconds']} | {r['most_jobs_bound_in_part']} | "
            f"{r['writes_per_job_without_events']} | {operator_cpu} |\n"
        )
    return "".join(lines) + "\n"
