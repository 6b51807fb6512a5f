"""One measured run: fresh cluster, one contender, one workload, every figure the report needs."""

from __future__ import annotations

import asyncio
import datetime
import functools
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.cluster import NAMESPACE, BenchCluster
from bench.contender_base import Contender
from bench.contenders import CONTENDERS, contender
from bench.guard import Stalled, WaitLimits, Watchdog
from bench.measure import (
    CpuMeter,
    conversion_figures,
    forced_watch_closes,
    forced_watch_closes_by_watch,
    peak_rss_mib,
    pod_watch_figures,
    read_audit,
    refused_by,
    requests_by,
    writes,
)
from bench.observe import Timeline

SAMPLE_INTERVAL = 1.0
SETTLE_AFTER_RESTART_S = 15.0  # after a restart's re-observe: anything it would wrongly recreate shows up by now


def identities() -> list[str]:
    return sorted({contender(name).identity for name in CONTENDERS})


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def harness_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def follow(cluster: BenchCluster, who: Contender, timeline: Timeline, synced: asyncio.Event) -> None:
    """Feed the timeline from two watches: the namespace's pods, and the contender's job objects."""
    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    from_pods = who.job_path is None

    async def pods() -> None:
        async for kind, pod in cluster.admin.watch(pods_path):
            timeline.on_pod(kind, pod, from_pods)

    async def jobs() -> None:
        async for kind, obj in cluster.admin.watch(who.watch_path or who.job_path):
            timeline.on_job(who.job_state, kind, obj)

    tasks = [asyncio.create_task(pods())] + ([asyncio.create_task(jobs())] if who.job_path else [])
    synced.set()  # both start from an empty namespace: the first list is trivially in sync
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


def failed(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is not None


def run_broken(name: str, who: Contender, submitter: asyncio.Task, follower: asyncio.Task) -> BaseException | None:
    """Why a run can no longer finish, if it cannot: the submitter failed, the operator exited, or the harness's
    watch (which runs forever) ended, after which every later figure would be wrong."""
    if failed(submitter):
        return submitter.exception()
    exited = who.exit_report()
    if exited is not None:
        return RuntimeError(exited)
    if follower.done():
        problem = RuntimeError(f"{name}: the harness's watch of pods and jobs stopped")
        problem.__cause__ = None if follower.cancelled() else follower.exception()
        return problem
    return None


QUIET_SECONDS = 10.0  # no pod event for this long before the steady state's idle window


async def wait_until(
    condition: Callable[[], bool], within_s: float, on_tick: Callable[[], None], watchdog: Watchdog
) -> bool:
    """True once `condition` holds, False after `within_s`; the watchdog raises why the run must end sooner."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        on_tick()
        if condition():
            return True
        await watchdog.check()
        await asyncio.sleep(SAMPLE_INTERVAL)
    return False


def guard(
    cluster: BenchCluster,
    who: Contender,
    timeline: Timeline,
    broken: Callable[[], BaseException | None],
    limits: WaitLimits,
) -> Watchdog:
    """The watchdog of a run: `broken` each tick; a LIST of the pods and the contender's jobs every minute."""

    async def listing() -> dict[str, tuple[str, int]]:
        # resourceVersion=0: served from the API server's watch cache, not etcd (a full LIST of 8000 pods timed out
        # on a loaded machine); a stale answer is fine, missed_by_watch judges each object by its own version.
        pods = (await cluster.admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods?resourceVersion=0"))["items"]
        path = who.watch_path or who.job_path
        jobs = (await cluster.admin.get(f"{path}?resourceVersion=0"))["items"] if path else []
        return timeline.listed_states(pods, jobs, who.job_state if path else None)

    return Watchdog(
        broken, timeline.seen_states, timeline.summary, listing, None, limits.list_every_s, limits.stall_s,
        lambda: timeline.watched_versions,
    )  # fmt: skip


async def start_workload(
    name: str, jobs: int, workers: int, nodes: int, complete_after: str | None, say: Callable[[str], None]
) -> tuple[BenchCluster, Contender, Timeline, asyncio.Task, asyncio.Task, CpuMeter]:
    cluster = BenchCluster.up(nodes, identities(), say=say)
    who = contender(name)
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        await asyncio.to_thread(who.install, cluster)
    except BaseException:
        await teardown(cluster, who)
        raise
    pids = cluster.component_pids()
    if who.pid is not None:
        pids["operator"] = who.pid
    meter = CpuMeter(pids)
    timeline = Timeline(jobs, workers, who.job_of_pod)
    synced = asyncio.Event()
    follower = asyncio.create_task(follow(cluster, who, timeline, synced))
    await synced.wait()
    meter.start()
    timeline.start()
    say(f"  {name}: submitting {jobs} x {workers}")
    submitter = asyncio.create_task(who.submit(cluster, jobs, workers, complete_after))
    return cluster, who, timeline, follower, submitter, meter


async def throughput_run(
    name: str, jobs: int, workers: int, nodes: int, complete_after: str, limits: WaitLimits, say: Callable[[str], None]
) -> dict[str, Any]:
    """Create N jobs as fast as a client can and follow them to Succeeded."""
    within_s = limits.within_s
    began, harness_before = utcnow(), harness_cpu()
    cluster, who, timeline, follower, submitter, meter = await start_workload(
        name, jobs, workers, nodes, complete_after, say
    )
    series: list[tuple[float, int]] = []
    watchdog = guard(cluster, who, timeline, functools.partial(run_broken, name, who, submitter, follower), limits)
    stalled = None
    try:
        try:
            finished = await wait_until(
                functools.partial(timeline.all, "Succeeded"),
                within_s,
                lambda: series.append((timeline.now(), timeline.running_now())),
                watchdog.expecting(timeline.progress),
            )
        except Stalled as stall:  # recorded unfinished with what was seen, like a run that timed out
            say(f"  {name}: stalled: {stall.why}")
            finished, stalled = False, stall.why
        ended = utcnow()
        cpu = meter.stop()
        peak = peak_rss_mib(who.pid) if who.pid else None
        own_figures = who.final_figures(jobs) if who.pid else {}
        who.stop()
        apiserver_metrics = await cluster.admin.get_text("/metrics")
        record = {
            "kind": "throughput",
            "contender": name,
            "jobs": jobs,
            "workers": workers,
            "nodes": nodes,
            "complete_after": complete_after,
            "finished": finished,
            "stalled": stalled,
            "harness_lists": watchdog.lists,
            "harness_failed_lists": watchdog.failed_lists,
            "watch_disagreements": watchdog.disagreements,
            **timeline.summary(),
            "cpu_seconds": cpu,
            "harness_cpu_seconds": round(harness_cpu() - harness_before, 2),
            "operator_peak_rss_mib": round(peak, 1) if peak else None,
            "forced_watch_closes": forced_watch_closes(cluster.apiserver_log),
            "forced_watch_closes_by_watch": forced_watch_closes_by_watch(cluster.apiserver_log),
            **pod_watch_figures(apiserver_metrics),
            **conversion_figures(apiserver_metrics),
            **who.experiment,
            **own_figures,
            "series": series,
        }
        record.update(request_figures(cluster, who, began, ended, jobs))
        return record
    finally:
        await teardown(cluster, who, submitter, follower)


async def teardown(cluster: BenchCluster, who: Contender, *tasks: asyncio.Task) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    who.stop(hard=True)
    await cluster.down()


def request_figures(
    cluster: BenchCluster, who: Contender, since: datetime.datetime, until: datetime.datetime, jobs: int
) -> dict[str, Any]:
    records = read_audit(cluster.audit_log)
    tally = requests_by(records, who.identity, since, until)
    job_writes = writes(tally)
    events = sum(count for key, count in tally.items() if key == "create events")
    return {
        "requests": dict(sorted(tally.items())),
        "refused_requests": dict(sorted(refused_by(records, who.identity, since, until).items())),
        "writes": job_writes,
        "writes_per_job": round(job_writes / jobs, 2),
        "writes_per_job_without_events": round((job_writes - events) / jobs, 2),
    }


@dataclass
class Restart:
    """One kill -9 and start of the operator: when it was killed, ready, done re-observing, and the window after."""

    killed: datetime.datetime
    until: datetime.datetime
    ready_s: float
    reobserved: bool
    reobserved_s: float
    peak_rss_mib: float | None

    def figures(self, prefix: str, records: list, identity: str) -> dict[str, Any]:
        after = requests_by(records, identity, self.killed, self.until)
        return {
            f"{prefix}_ready_s": self.ready_s,
            f"{prefix}_reobserved": self.reobserved,
            f"{prefix}_reobserved_s": self.reobserved_s,
            f"{prefix}_pods_recreated": after.get("create pods", 0),
            f"{prefix}_pods_deleted": after.get("delete pods", 0),
            f"{prefix}_peak_rss_mib": self.peak_rss_mib,
        }


async def kill_and_restart(
    cluster: BenchCluster, who: Contender, jobs: int, within_s: float, watchdog: Watchdog
) -> Restart:
    """kill -9, start again, wait until it serves readiness and until it has re-observed every job."""
    who.stop(hard=True)
    killed, started = utcnow(), time.monotonic()
    await asyncio.to_thread(who.start, cluster)
    ready_after = time.monotonic() - started
    # Timed by the operator's own metrics, not the watch: no cross-check LIST may hold the next look at them.
    watching = watchdog.expecting(None, cross_check=False)
    reobserved = await wait_until(lambda: who.reobserved(jobs), within_s, lambda: None, watching)
    reobserve_after = time.monotonic() - started
    await asyncio.sleep(SETTLE_AFTER_RESTART_S)
    peak = peak_rss_mib(who.pid) if who.pid else None
    return Restart(killed, utcnow(), round(ready_after, 2), reobserved, round(reobserve_after, 2),
                   round(peak, 1) if peak else None)  # fmt: skip


async def steady_run(
    name: str, jobs: int, workers: int, nodes: int, idle_seconds: float, limits: WaitLimits, say: Callable[[str], None]
) -> dict[str, Any]:
    """N jobs that keep running: writes while nothing changes, then a kill -9 and a restart of the operator."""
    within_s = limits.within_s
    cluster, who, timeline, follower, submitter, _ = await start_workload(name, jobs, workers, nodes, None, say)
    try:
        # Like the throughput run: a failed submitter, an exited operator or a dead harness watch ends the wait at
        # once with its cause (a steady run once sat idle for 14 minutes with all 1000 jobs Running).
        watchdog = guard(cluster, who, timeline, functools.partial(run_broken, name, who, submitter, follower), limits)
        running = await wait_until(
            functools.partial(timeline.all, "Running"), within_s, lambda: None, watchdog.expecting(timeline.progress)
        )
        if not running:
            raise TimeoutError(f"{name}: only {len(timeline.running_at)}/{jobs} jobs Running after {within_s:.0f}s")
        # "Nothing changing" means the pods too: kwok may go on playing stages from a stale view after every job
        # is Running (each such play gives a pod a new address, which our operator then publishes).
        quiet = await wait_until(
            lambda: timeline.quiet_for() >= QUIET_SECONDS, within_s, lambda: None, watchdog.expecting(None)
        )
        if not quiet:
            raise Stalled(f"{name}: the pods never went {QUIET_SECONDS:.0f} s without an event", timeline.summary())
        await asyncio.sleep(10)  # let status writes and events of the last transitions land
        events_before, changes_before = timeline.pod_events, timeline.pod_ip_changes
        idle_from = utcnow()
        await asyncio.sleep(idle_seconds)
        await watchdog.check()  # the idle window's figures are only true if the watch lived through it
        idle_to = utcnow()
        idle_pod_events, idle_ip_changes = timeline.pod_events - events_before, timeline.pod_ip_changes - changes_before
        say(f"  {name}: killing the operator with {jobs} jobs Running")
        restart = await kill_and_restart(cluster, who, jobs, within_s, watchdog)
        replacement = None
        if who.replace_pod():  # the operator again, as a new pod: a new Lease identity, which must wait it out
            say(f"  {name}: killing the operator again, starting a replacement pod")
            replacement = await kill_and_restart(cluster, who, jobs, within_s, watchdog)
        records = read_audit(cluster.audit_log)
        idle = requests_by(records, who.identity, idle_from, idle_to)
        after = requests_by(records, who.identity, restart.killed, restart.until)
        return {
            "kind": "steady",
            "contender": name,
            "jobs": jobs,
            "workers": workers,
            "nodes": nodes,
            "idle_seconds": idle_seconds,
            "idle_writes_per_minute": round(writes(idle) * 60 / idle_seconds, 2),
            "idle_writes_per_minute_with_lease": round(writes(idle, include_per_operator=True) * 60 / idle_seconds, 2),
            "idle_requests": dict(sorted(idle.items())),
            "idle_pod_events": idle_pod_events,
            "idle_pod_ip_changes": idle_ip_changes,
            "restart_ready_s": restart.ready_s,
            "restart_reobserved": restart.reobserved,
            "restart_reobserved_s": restart.reobserved_s,
            "pods_recreated": after.get("create pods", 0),
            "pods_deleted_after_restart": after.get("delete pods", 0),
            "restart_requests": dict(sorted(after.items())),
            "restarted_peak_rss_mib": restart.peak_rss_mib,
            "harness_lists": watchdog.lists,
            "harness_failed_lists": watchdog.failed_lists,
            "watch_disagreements": watchdog.disagreements,
            **(replacement.figures("replacement", records, who.identity) if replacement else {}),
        }
    finally:
        await teardown(cluster, who, submitter, follower)
