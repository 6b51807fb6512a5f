"""The Kueue scenario: N jobs x W one-GPU workers through one ClusterQueue whose GPU quota is the cluster's GPUs,
this operator against Kubeflow's PyTorchJob (Kueue's built-in integration), each on a fresh cluster with Kueue.

What it shows: how well each keeps a queue of GPUs busy (time to drain the queue, mean GPU occupancy), how long a
job takes from Kueue's admission until all its pods run (the controller's part), and what each costs the API
server (writes per job, its own and Kueue's on its behalf). kwok completes each pod `complete_after` after it
started, so the queue drains in waves of GPUs / W jobs. Figures from the pods and Workloads are pure
(bench/queue_figures.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import yaml

from bench import kubeflow
from bench.client import create_all
from bench.cluster import NAMESPACE, BenchCluster
from bench.contenders import COMMAND, CREATE_CONCURRENCY, IMAGE, Contender, Kubeflow, contender, sim_annotations
from bench.gang import broken, gpu_job
from bench.guard import Stalled, WaitLimits
from bench.measure import CpuMeter, peak_rss_mib, read_audit, requests_by, writes
from bench.queue_figures import GPU, QUEUE_LABELS, QueueTimeline, queue_figures
from bench.run import follow, guard, identities, request_figures, teardown, utcnow, wait_until
from trainingjob.api import constants as k
from trainingjob.cluster.build import KUEUE
from trainingjob.cluster.control_plane import component_running
from trainingjob.cluster.kueue import settings as kueue_settings
from trainingjob.cluster.kueue.run import NAME as KUEUE_PROCESS
from trainingjob.cluster.kueue.run import ensure_running

GPUS_PER_NODE = 8  # what the bench's kwok nodes offer
QUEUE = "bench"  # the ResourceFlavor, ClusterQueue and LocalQueue
KUEUE_API = "kueue.x-k8s.io/v1beta2"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NAMESPACE}/workloads"


def queue_objects(gpus: int) -> list[dict[str, Any]]:
    """One flavor, one ClusterQueue with `gpus` GPUs (cpu and memory far beyond what the pods ask), one LocalQueue
    in the bench namespace."""
    quotas = {"cpu": "10000", "memory": "100Ti", GPU: str(gpus)}
    group = {
        "coveredResources": list(quotas),
        "flavors": [{"name": QUEUE, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}],
    }
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": QUEUE}, "spec": {}},
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": QUEUE},
            "spec": {"namespaceSelector": {}, "resourceGroups": [group]},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": NAMESPACE},
            "spec": {"clusterQueue": QUEUE},
        },
    ]


def queued_job(who: Contender, name: str, workers: int, complete_after: str) -> dict[str, Any]:
    """One job of W one-GPU workers in the LocalQueue: a TrainingJob, or a PyTorchJob of 1 Master + W-1 Workers."""
    if isinstance(who, Kubeflow):
        body = kubeflow.pytorch_job(name, workers, IMAGE, COMMAND, sim_annotations(complete_after))
        for replica in body["spec"]["pytorchReplicaSpecs"].values():
            container = replica["template"]["spec"]["containers"][0]
            container["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    else:
        body = gpu_job(name, workers, complete_after)
    body["metadata"]["labels"] = {k.LABEL_KUEUE_QUEUE: QUEUE}
    return body


def start_kueue(cluster: BenchCluster, who: Contender, gpus: int, say: Callable[[str], None]) -> None:
    """Kueue, its queues, then the contender. Kubeflow's CRD goes first, so that Kueue's PyTorchJob integration
    finds its API at start; ours starts after Kueue, so that its informers find Kueue's API at once."""
    if isinstance(who, Kubeflow):
        kubeflow.install(cluster)
    ensure_running(cluster.state, say)
    cluster.kubectl("apply", "-f", "-", input_text="\n---\n".join(yaml.safe_dump(o) for o in queue_objects(gpus)))
    cluster.kubectl("wait", "--for=condition=Active", f"clusterqueue/{QUEUE}", "--timeout=120s")
    who.install(cluster)


def kueue_broken(cluster: BenchCluster, who: Contender, watches: list[asyncio.Task]) -> BaseException | None:
    """The gang run's reasons (contender exited, a watch ended), and Kueue's process gone."""
    problem = broken(who, watches)
    if problem is not None:
        return problem
    if not component_running(cluster.state, KUEUE_PROCESS):
        return RuntimeError(f"Kueue exited: see its log under {cluster.state.root}")
    return None


async def watch_workloads(cluster: BenchCluster, timeline: QueueTimeline) -> None:
    async for kind, workload in cluster.admin.watch(WORKLOADS):
        timeline.on_workload(kind, workload)


async def kueue_run(
    name: str,
    jobs: int,
    workers: int,
    gpus: int,
    complete_after: str,
    limits: WaitLimits,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """`jobs` x `workers` one-GPU workers through a ClusterQueue of `gpus` GPUs, followed until every job Succeeded."""
    if name not in QUEUE_LABELS:
        raise ValueError(f"{name} has no jobs Kueue can queue: one of {', '.join(QUEUE_LABELS)}")
    nodes = -(-gpus // GPUS_PER_NODE)
    cluster = BenchCluster.up(nodes, [*identities(), kueue_settings.USER], say=say)
    who = contender(name)
    tasks: list[asyncio.Task] = []
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        await asyncio.to_thread(start_kueue, cluster, who, gpus, say)
        timeline = QueueTimeline(jobs, workers, who.job_of_pod)
        meter = CpuMeter({**cluster.component_pids(), "operator": who.pid})
        synced = asyncio.Event()
        tasks += [
            asyncio.create_task(follow(cluster, who, timeline, synced)),
            asyncio.create_task(watch_workloads(cluster, timeline)),
        ]
        await synced.wait()
        began = utcnow()
        meter.start()
        timeline.start()
        say(f"  {name}: submitting {jobs} x {workers} GPU workers to a ClusterQueue of {gpus} GPUs")
        requests = [(who.job_path, queued_job(who, f"job-{i:05d}", workers, complete_after)) for i in range(jobs)]
        await create_all(cluster.admin, requests, CREATE_CONCURRENCY)
        watchdog = guard(cluster, who, timeline, lambda: kueue_broken(cluster, who, tasks), limits)
        stalled = None
        try:
            finished = await wait_until(
                lambda: timeline.all("Succeeded"), limits.within_s, lambda: None, watchdog.expecting(timeline.progress)
            )
        except Stalled as stall:  # recorded unfinished with what was seen, as the throughput run does
            say(f"  {name}: stalled: {stall.why}")
            finished, stalled = False, stall.why
        ended, until = utcnow(), timeline.now()
        cpu = meter.stop()
        peak = peak_rss_mib(who.pid) if who.pid else None
        kueue_pid = cluster.state.pids.get(KUEUE_PROCESS)
        kueue_peak = peak_rss_mib(kueue_pid) if kueue_pid else None
        summary = timeline.summary()
        drain = summary["all_succeeded_s"]
        kueue_requests = requests_by(read_audit(cluster.audit_log), kueue_settings.USER, began, ended)
        record = {
            "kind": "kueue",
            "contender": name,
            "jobs": jobs,
            "workers": workers,
            "gpus": gpus,
            "nodes": nodes,
            "complete_after": complete_after,
            "kueue_version": KUEUE.version,
            "finished": finished,
            "stalled": stalled,
            **summary,
            "drain_s": drain,
            **queue_figures(timeline, gpus, drain if drain is not None else until),
            "cpu_seconds": cpu,
            "operator_peak_rss_mib": round(peak, 1) if peak else None,
            "kueue_peak_rss_mib": round(kueue_peak, 1) if kueue_peak else None,
            "kueue_requests": dict(sorted(kueue_requests.items())),
            "kueue_writes_per_job": round(writes(kueue_requests) / jobs, 2),
            **who.experiment,
        }
        record.update(request_figures(cluster, who, began, ended, jobs))
        return record
    finally:
        await teardown(cluster, who, *tasks)
