"""The sweep scenario: one TrainingSweep of N trials on kwok nodes, and what its controller costs per trial.

Why: the sweep controller rebuilds its Optuna study from the trials on every decision (docs/sweeps.md, "Restarts"),
so its cost grows with the trials; issue 38 asks for it measured, reconciles and writes per trial. kwok runs no
code, so the harness plays each trial's worker 0 as `tj cluster simulate-training` does (cluster/simulate.py): a
pod-bound token, `EPOCHS` reports of a deterministic objective to the operator's real progress endpoint, then the
worker marked to complete once status.progress shows 100 %. Nothing is pruned (pruner `none`): each trial runs
its epochs, so the counts depend on the trials, not on the sampler's luck.

Figures: reconciles by controller from the operator's own `trainingjob_reconciles_total`; its API requests by verb
and resource from the API server's audit log (its identity, the run's window), as the other scenarios count them.
"""

from __future__ import annotations

import asyncio
import math
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from bench.cluster import NAMESPACE, BenchCluster, free_port
from bench.contender_base import IMAGE, scrape
from bench.contenders import Ours
from bench.guard import Stalled, WaitLimits, Watchdog
from bench.measure import WRITE_VERBS, peak_rss_mib, read_audit, requests_by, writes
from bench.run import identities, teardown, utcnow, wait_until
from trainingjob.api import constants as k
from trainingjob.api.conversion import to_internal
from trainingjob.cluster.simulate import finish_workers, worker_credentials
from trainingjob.sdk import ProgressReporter

SWEEP = "bench-sweep"
EPOCHS = 2
DONE = ("Succeeded", "Failed")


class SweepOperator(Ours):
    """Our operator with its progress endpoint on (the trials report through it); otherwise as in the others."""

    def endpoint_args(self) -> list[str]:
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        return ["--progress-port", str(port), "--progress-bind", "127.0.0.1", "--progress-url", url]


def sweep_manifest(trials: int, parallelism: int) -> dict[str, Any]:
    template = {
        "framework": "xgboost",
        "image": IMAGE,
        "command": ["python", "train.py"],
        "numWorkers": 1,
        "gpusPerWorker": 0,
        "hyperparameters": {"dataset": "digits", "epochs": EPOCHS},
    }
    spec = {
        "trialTemplate": {"spec": template},
        "parameters": [
            {"name": "learningRate", "type": "float", "min": 0.01, "max": 0.5, "log": True},
            {"name": "maxDepth", "type": "int", "min": 1, "max": 6},
        ],
        "objective": {"metric": "accuracy", "direction": "maximize"},
        "algorithm": {"name": "tpe", "seed": 7},
        "earlyStopping": {"pruner": "none"},
        "maxTrials": trials,
        "parallelism": parallelism,
        "maxFailedTrials": trials,
    }
    return {"apiVersion": k.SWEEP_API_VERSION, "kind": k.SWEEP_KIND, "metadata": {"name": SWEEP}, "spec": spec}


def accuracy(hyperparameters: Mapping[str, Any], epoch: int) -> float:
    """A deterministic objective: best near learningRate 0.1 and maxDepth 4, rising with the epochs."""
    rate = float(hyperparameters.get("learningRate", 0.1))
    depth = float(hyperparameters.get("maxDepth", 4))
    best = 0.95 - 0.08 * abs(math.log10(rate) + 1) - 0.03 * abs(depth - 4)
    return round(best * epoch / EPOCHS, 4)


class Trials:
    """What the harness's watch saw of the sweep and its trials: each trial's phase and progress, the sweep's."""

    def __init__(self) -> None:
        self.phase: dict[str, str | None] = {}
        self.percent: dict[str, float] = {}
        self.hyperparameters: dict[str, dict[str, Any]] = {}
        self.sweep: dict[str, Any] = {}
        self.events = 0
        self._recorded: dict[str, asyncio.Event] = {}

    def on_trial(self, kind: str, obj: dict[str, Any]) -> None:
        body = to_internal(obj)
        name = body["metadata"]["name"]
        self.events += 1
        if kind == "DELETED":
            self.phase[name] = "Deleted"
            return
        status = body.get("status") or {}
        self.phase[name] = status.get("phase")
        self.percent[name] = float((status.get("progress") or {}).get("percent") or 0)
        if self.percent[name] >= 100:
            self.recorded(name).set()
        self.hyperparameters[name] = (body.get("spec") or {}).get("hyperparameters") or {}

    def recorded(self, name: str) -> asyncio.Event:
        """Set once the trial's status shows 100 %: its reports reached the status the sweep reads."""
        return self._recorded.setdefault(name, asyncio.Event())

    def on_sweep(self, kind: str, obj: dict[str, Any]) -> None:
        self.events += 1
        self.sweep = obj.get("status") or {}

    def done(self) -> bool:
        return self.sweep.get("phase") in DONE

    def seen(self) -> dict[str, str]:
        return {name: str(phase) for name, phase in self.phase.items()}

    def summary(self) -> dict[str, Any]:
        counts = {key: self.sweep.get(key) for key in ("phase", "trialsCreated", "trialsRunning", "trialsSucceeded")}
        return {**counts, "trials_seen": len(self.phase)}


async def play_worker(api: client.ApiClient, trials: Trials, name: str) -> None:
    """Worker 0 of one trial: report EPOCHS epochs, wait until the status shows 100 %, then let kwok complete it."""
    with tempfile.TemporaryDirectory(prefix="tj-bench-worker-") as directory:
        env = await worker_credentials(api, NAMESPACE, name, Path(directory))
        reporter = ProgressReporter(env=env, min_interval=0.0)

        def train() -> bool:
            for epoch in range(1, EPOCHS + 1):
                values = {"accuracy": accuracy(trials.hyperparameters.get(name, {}), epoch)}
                reporter.report_progress(epoch=epoch, total_epochs=EPOCHS, metrics=values)
            return reporter.flush()

        if not await asyncio.to_thread(train):
            raise RuntimeError(f"the progress endpoint refused {name}'s reports")
    await trials.recorded(name).wait()
    await finish_workers(api, NAMESPACE, name, 1)


async def follow_sweep(cluster: BenchCluster, trials: Trials, api: client.ApiClient, players: list[asyncio.Task]):
    """The trials' and the sweep's watches; a player for each trial the first time it is seen Running."""
    jobs = f"/apis/{k.GROUP}/{k.WATCHED_VERSION}/namespaces/{NAMESPACE}/{k.PLURAL}"  # only the trials are there
    sweeps = f"/apis/{k.GROUP}/{k.SWEEP_VERSION}/namespaces/{NAMESPACE}/{k.SWEEP_PLURAL}"
    played: set[str] = set()

    async def watch_trials() -> None:
        async for kind, obj in cluster.admin.watch(jobs):
            trials.on_trial(kind, obj)
            name = obj["metadata"]["name"]
            if trials.phase.get(name) == "Running" and name not in played:
                played.add(name)
                players.append(asyncio.create_task(play_worker(api, trials, name), name=f"worker 0 of {name}"))

    async def watch_sweep() -> None:
        async for kind, obj in cluster.admin.watch(sweeps):
            trials.on_sweep(kind, obj)

    await asyncio.gather(watch_trials(), watch_sweep())


def broken(who: Ours, follower: asyncio.Task, players: list[asyncio.Task]) -> BaseException | None:
    """Why the sweep can no longer finish: the operator exited, the harness's watch ended, a worker 0 failed."""
    exited = who.exit_report()
    if exited is not None:
        return RuntimeError(exited)
    if follower.done():
        problem = RuntimeError("the harness's watch of the sweep and its trials stopped")
        problem.__cause__ = None if follower.cancelled() else follower.exception()
        return problem
    failed = next((t for t in players if t.done() and not t.cancelled() and t.exception() is not None), None)
    return failed.exception() if failed is not None else None


RECONCILES = re.compile(r'^trainingjob_reconciles_total\{[^}]*controller="([^"]+)"[^}]*\}\s+(\S+)$', re.MULTILINE)


def reconciles_by_controller(metrics: str) -> dict[str, int]:
    """controller -> reconciles, from the operator's /metrics text."""
    return {controller: int(float(value)) for controller, value in RECONCILES.findall(metrics)}


def per_trial(tally: Mapping[str, int], reconciles: Mapping[str, int], trials: int) -> dict[str, Any]:
    """The run's totals divided by its trials: reconciles by controller, writes by `verb resource`, writes in all
    (Lease renewals left out: they are per operator, not per trial) and without Events."""
    if trials <= 0:
        raise ValueError("a sweep run has at least one trial")
    by_kind = {key: n for key, n in sorted(tally.items()) if key.split(" ", 1)[0] in WRITE_VERBS}
    events = sum(n for key, n in by_kind.items() if key.split(" ", 1)[1] == "events")
    total = writes(tally)
    return {
        "reconciles_per_trial": {name: round(n / trials, 2) for name, n in sorted(reconciles.items())},
        "writes_by_kind": by_kind,
        "writes_per_trial_by_kind": {key: round(n / trials, 2) for key, n in by_kind.items()},
        "writes_per_trial": round(total / trials, 2),
        "writes_per_trial_without_events": round((total - events) / trials, 2),
    }


async def sweep_run(
    trials: int, parallelism: int, nodes: int, limits: WaitLimits, say: Callable[[str], None]
) -> dict[str, Any]:
    """One TrainingSweep of `trials` trials, `parallelism` at a time, followed until it ends (guarded)."""
    cluster = BenchCluster.up(nodes, identities(), say=say)
    who = SweepOperator()
    tasks: list[asyncio.Task] = []
    players: list[asyncio.Task] = []
    api = None
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        await asyncio.to_thread(who.install, cluster)
        await config.load_kube_config(config_file=str(cluster.state.kubeconfig))
        api = client.ApiClient()
        seen = Trials()
        tasks.append(asyncio.create_task(follow_sweep(cluster, seen, api, players)))
        began, started = utcnow(), time.monotonic()
        say(f"  sweep: {trials} trials, {parallelism} at a time, on {nodes} kwok nodes")
        await cluster.admin.create(f"/apis/{k.SWEEP_API_VERSION}/namespaces/{NAMESPACE}/{k.SWEEP_PLURAL}",
                                   sweep_manifest(trials, parallelism))  # fmt: skip
        watchdog = Watchdog(
            lambda: broken(who, tasks[0], players), seen.seen, seen.summary, None, None, limits.list_every_s,
            limits.stall_s,
        )  # fmt: skip
        stalled = None
        try:
            finished = await wait_until(
                seen.done, limits.within_s, lambda: None, watchdog.expecting(lambda: seen.events)
            )
        except Stalled as stall:
            say(f"  sweep: stalled: {stall.why}")
            finished, stalled = False, stall.why
        wall = round(time.monotonic() - started, 1)
        await asyncio.sleep(5)  # writes in flight when the sweep ended (its last Events) land inside the window
        ended = utcnow()
        peak = peak_rss_mib(who.pid) if who.pid else None
        reconciles = reconciles_by_controller(scrape(who.metrics_url))
        counted = seen.sweep.get("trialsCreated") or trials  # a run that did not finish: the trials it made
        tally = requests_by(read_audit(cluster.audit_log), who.identity, began, ended)
        return {
            "kind": "sweep",
            "contender": "ours",
            "trials": trials,
            "jobs": trials,  # the provenance table's "jobs x workers": each trial is a TrainingJob of 1 worker
            "workers": 1,
            "parallelism": parallelism,
            "nodes": nodes,
            "epochs": EPOCHS,
            "finished": finished,
            "stalled": stalled,
            "sweep_phase": seen.sweep.get("phase"),
            "trials_succeeded": seen.sweep.get("trialsSucceeded"),
            "trials_failed": seen.sweep.get("trialsFailed"),
            "wall_s": wall,
            "reconciles": reconciles,
            "requests": dict(sorted(tally.items())),
            "operator_peak_rss_mib": round(peak, 1) if peak else None,
            "trials_counted": counted,
            **per_trial(tally, reconciles, counted),
        }
    finally:
        for task in players:
            task.cancel()
        if api is not None:
            await api.close()
        await teardown(cluster, who, *tasks)


def sweep_section(records: list[dict[str, Any]]) -> str:
    """The report's table: the latest sweep run of each shape, per trial — reconciles by controller, then the
    operator's writes by verb and resource — with the run's wall time, peak RSS and commit."""
    latest: dict[tuple[int, int], dict[str, Any]] = {}
    for r in (r for r in records if r.get("kind") == "sweep"):
        latest[(r["trials"], r["parallelism"])] = r
    parts = []
    for (trials, parallelism), r in sorted(latest.items()):
        provenance = r.get("provenance") or {}
        commit = f"{str(provenance.get('commit'))[:12]}{' (dirty tree)' if provenance.get('dirty') else ''}"
        load = provenance.get("load_average")
        outcome = "finished" if r["finished"] else f"**did not finish** ({r.get('stalled') or 'timed out'})"
        parts += [
            f"### One TrainingSweep, {trials} trials, {parallelism} at a time\n\n",
            f"Commit `{commit}`, load average {load} at the start; {r['nodes']} kwok nodes; each trial 1 worker "
            f"reporting {r['epochs']} epochs through the progress endpoint; pruner none. "
            f"Sweep {r['sweep_phase']} ({outcome}) in {r['wall_s']} s; {r['trials_succeeded']} trials succeeded, "
            f"{r['trials_failed']} failed; figures divided by the {r['trials_counted']} trials created. "
            f"Operator peak RSS {r['operator_peak_rss_mib']} MiB.\n\n",
            "| per trial | count |\n|---|---|\n",
        ]
        parts += [f"| reconciles, {name} controller | {n} |\n" for name, n in r["reconciles_per_trial"].items()]
        parts += [f"| `{key}` | {n} |\n" for key, n in r["writes_per_trial_by_kind"].items()]
        parts += [
            f"| **writes in all** (no Lease renewals) | **{r['writes_per_trial']}** |\n",
            f"| writes without Events | {r['writes_per_trial_without_events']} |\n\n",
        ]
    if not parts:
        return ""
    intro = (
        "## Sweeps: what the sweep controller costs per trial\n\n`python -m bench --sweep-trials N "
        "--sweep-parallelism P` (bench/sweep.py). Reconciles from the operator's `trainingjob_reconciles_total`, "
        "writes from the audit log (its identity, from the sweep's create until 5 s after it ended), both over the "
        "whole run, job controller included.\n\n"
    )
    return intro + "".join(parts)
