"""`make bench` / `python -m bench`: run the scale benchmark and write its report to a scratch directory.

Each run starts a fresh local cluster; contenders alternate within each repeat, so a slow moment of the machine
does not always hit the same one. Records are written after every run, so an interrupted benchmark keeps what it
measured, and `--append` adds new runs to those already in the output's benchmarks.json. Only `--update-docs`
writes the committed report (docs/benchmarks.md): a trial run must not replace measured figures by accident.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.contenders import CONTENDERS
from bench.gang import gang_run
from bench.guard import LIST_EVERY_S, STALL_S, WaitLimits
from bench.kueue import kueue_run
from bench.provenance import MixedCommits, collect, git_state, refuse_mixed_commits
from bench.queue_figures import QUEUE_LABELS
from bench.report import write_report, write_runs
from bench.run import steady_run, throughput_run
from bench.sweep import sweep_run

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SCRATCH = REPO / "bench-results"  # git-ignored

PREAMBLE = """# Benchmarks

Written by `python -m bench` (`make bench`, `make bench-quick`; code in `bench/`); the raw records, each with its
commit, date, machine and component versions, are in `benchmarks.json`.

**Workload.** N TrainingJobs x W workers, created as fast as a client with {concurrency} requests in flight can,
on a fresh local cluster ({nodes} kwok nodes) for every run. kwok runs each pod and completes it
`{complete_after}` after it started, so jobs go Pending → Running → Succeeded. Contenders, alternated within
each repeat: **this operator** (as its shipped ServiceAccount and RBAC); **Kubeflow training-operator**
(built from its Go module, PyTorchJobs of 1 Master + W-1 Workers, its own ClusterRole) with its defaults
(`--kube-api-qps=20 --kube-api-burst=30 --controller-threads=1`) and tuned to our operator's settings (no
effective client rate limit, 16 reconcile workers); **the raw limit**: a client creating exactly the pods our
operator would, with the same {concurrency} creates in flight; and **raw + the same children**: that client also
creating each job's Service, ConfigMap and (empty) EndpointSlice as our operator would, without an operator (the
price of the objects a job is made of; what ours takes beyond it is the operator's own).

**Figures.** Times are seconds from the first create until the harness's own watch saw the last job's W pods all
exist / all run / the job's status say Running / Succeeded. "All pods Running" is timed from the pods, the same way
for every contender, and is what the ratios compare: a controller's own Running means different things (Kubeflow's
PyTorchJob is Running once its master runs; ours once every worker runs; raw pods have no status). CPU seconds come
from `/proc` for every process (the operator, API server, etcd, … share the machine's cores); peak RSS is the
operator's VmHWM. Requests are counted from the API server's audit log, filtered by each contender's identity;
"writes" are create/update/patch/delete except Lease renewals. Steady state: N jobs that keep running, writes in a
{idle}-s window with nothing changing, then `kill -9` of the operator and a restart: "ready" is when it serves
readiness again (ours: once it leads; it keeps the killed process's `$POD_NAME` identity, as a restarted container
does, so it re-takes its own Lease at once; Kubeflow runs without leader election, its default), "re-observed" when
it has reconciled at least N times and its work queue is empty (ours: `trainingjob_reconcile_duration_seconds_count`,
`trainingjob_workqueue_depth`; Kubeflow: `controller_runtime_reconcile_total`, `workqueue_depth`). Ours is then
killed once more and started as a replacement pod (a new `$POD_NAME`, as a Deployment's new pod has), which must
wait until the dead holder's Lease expires (15 s) before it leads.
"""


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--jobs", default="100,1000", help="comma-separated job counts (scenarios)")
    add("--workers", type=int, default=8, help="workers per job")
    add("--repeats", type=int, default=3)
    add("--contenders", default=",".join(CONTENDERS), help=f"comma-separated, of {', '.join(CONTENDERS)}")
    add("--nodes", type=int, default=100, help="fake nodes (8 GPUs, 110 pods each)")
    add("--complete-after", default="30s", help="how long kwok runs each pod before it succeeds")
    add("--steady-jobs", type=int, default=1000, help="jobs for the steady-state/restart run (0: skip it)")
    add("--steady-contenders", default="ours,kubeflow-tuned")
    add("--idle-seconds", type=float, default=60)
    add("--gang-jobs", type=int, default=16, help="GPU jobs of the gang scenario (0: skip it), bench/gang.py")
    add("--gang-workers", type=int, default=3, help="workers per gang job: 3 does not divide the 8-GPU nodes")
    add("--gang-nodes", type=int, default=4, help="8-GPU nodes of the gang scenario")
    add("--sweep-trials", type=int, default=0, help="trials of the sweep scenario (0: skip it), bench/sweep.py")
    add("--sweep-parallelism", type=int, default=10, help="trials of the sweep scenario running at a time")
    add("--sweep-nodes", type=int, default=4, help="kwok nodes of the sweep scenario")
    add("--kueue-jobs", type=int, default=0, help="jobs queued through Kueue (0: skip it), bench/kueue.py")
    add("--kueue-workers", type=int, default=4, help="one-GPU workers per job of the Kueue scenario")
    add("--kueue-gpus", type=int, default=64, help="GPUs of the Kueue scenario: the ClusterQueue's quota, 8 a node")
    add("--kueue-complete-after", default="20s", help="how long kwok runs each pod of the Kueue scenario")
    add("--kueue-contenders", default="ours,kubeflow-tuned", help="of ours, kubeflow-default, kubeflow-tuned")
    add("--timeout", type=float, default=3600, help="seconds one run may take before it is recorded unfinished")
    add("--list-every", type=float, default=LIST_EVERY_S, help="seconds between the LISTs that cross-check the watch")
    add("--stall-seconds", type=float, default=STALL_S, help="a wait expecting change ends after this long without")
    add("--out", type=Path, help="where benchmarks.md/.json/-running.png go (default: a new bench-results/<time>)")
    add("--update-docs", action="store_true", help=f"write the committed report in {DOCS} (the only way to)")
    add("--append", action="store_true", help="keep the runs already in the output's benchmarks.json")
    add("--mix-commits", action="store_true", help="allow runs of different commits in one table (named there)")
    add("--report-only", action="store_true", help="rewrite benchmarks.md from benchmarks.json, run nothing")
    args = parser.parse_args(argv)
    if args.update_docs and args.out is not None:
        parser.error("--update-docs writes docs/; --out names another directory: give one")
    if (args.append or args.report_only) and args.out is None and not args.update_docs:
        parser.error("--append and --report-only need the directory of earlier runs: --out DIR or --update-docs")
    args.out = DOCS if args.update_docs else args.out or SCRATCH / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return args


def say(message: str) -> None:
    print(f"{datetime.datetime.now():%H:%M:%S} {message}", flush=True)


async def main(args: argparse.Namespace) -> int:
    from bench.contender_base import CREATE_CONCURRENCY

    contenders = [c for c in args.contenders.split(",") if c]
    unknown = set(contenders) - set(CONTENDERS)
    if unknown:
        say(f"unknown contender(s): {', '.join(sorted(unknown))}")
        return 2
    queued = set(c for c in args.kueue_contenders.split(",") if c) - set(QUEUE_LABELS) if args.kueue_jobs else set()
    if queued:
        say(f"no jobs Kueue can queue for: {', '.join(sorted(queued))} (of {', '.join(QUEUE_LABELS)})")
        return 2
    records: list[dict[str, Any]] = []
    legacy_machine = None  # what a file older than per-run provenance said of its one machine
    existing = args.out / "benchmarks.json"
    if (args.append or args.report_only) and existing.exists():
        document = json.loads(existing.read_text())
        records, legacy_machine = document["runs"], document.get("machine")
    try:  # before hours of runs, not after: appending to another commit's runs would make a report that refuses
        refuse_mixed_commits(records if args.report_only else [*records, {"provenance": git_state()}], args.mix_commits)
    except MixedCommits as refused:
        say(f"refused: {refused}")
        return 2
    preamble = PREAMBLE.format(
        concurrency=CREATE_CONCURRENCY,
        nodes=args.nodes,
        complete_after=args.complete_after,
        idle=int(args.idle_seconds),
    )
    if args.report_only:
        write_report(records, args.out, preamble, legacy_machine, args.mix_commits)
        say(f"wrote {args.out / 'benchmarks.md'} from {len(records)} recorded runs")
        return 0
    say(f"writing to {args.out}")
    limits = WaitLimits(args.timeout, args.list_every, args.stall_seconds)

    def save(record: dict[str, Any], provenance: dict[str, Any]) -> None:
        """Record the run, then report; a report refused (the checkout changed commit between two runs of this
        invocation) must not lose the run: a 5,000 x 8 run of 25 minutes was lost so once."""
        records.append({**record, "provenance": provenance})
        try:
            write_report(records, args.out, preamble, legacy_machine, args.mix_commits)
        except MixedCommits as refused:
            write_runs(records, args.out, legacy_machine)
            say(f"  the run is kept in {args.out / 'benchmarks.json'}; no report: {refused}")

    for jobs in (int(n) for n in args.jobs.split(",") if n):
        for repeat in range(args.repeats if contenders else 0):  # `--contenders ""`: the other scenarios alone
            order = contenders[repeat % len(contenders) :] + contenders[: repeat % len(contenders)]
            for name in order:
                say(f"{jobs}x{args.workers} repeat {repeat + 1}/{args.repeats}: {name}")
                provenance = collect()
                record = await throughput_run(name, jobs, args.workers, args.nodes, args.complete_after, limits, say)
                say(f"  all Running {record['all_running_s']} s, all Succeeded {record['all_succeeded_s']} s")
                save(record, provenance)
    if args.steady_jobs:
        for name in (c for c in args.steady_contenders.split(",") if c):
            say(f"steady state {args.steady_jobs}x{args.workers}: {name}")
            provenance = collect()
            record = await steady_run(name, args.steady_jobs, args.workers, args.nodes, args.idle_seconds, limits, say)
            say(f"  idle writes/min {record['idle_writes_per_minute']}, re-observed {record['restart_reobserved_s']} s")
            save(record, provenance)
    if args.gang_jobs:
        for gang in (True, False):
            say(f"gang scenario {args.gang_jobs}x{args.gang_workers} on {args.gang_nodes * 8} GPUs, gangs {gang}")
            provenance = collect()
            record = await gang_run(
                gang, args.gang_jobs, args.gang_workers, args.gang_nodes, args.complete_after, limits, say
            )
            say(f"  all Succeeded {record['all_succeeded_s']} s, GPU-s held in part {record['partial_gpu_seconds']}")
            save(record, provenance)
    if args.sweep_trials:
        say(f"sweep scenario: {args.sweep_trials} trials, {args.sweep_parallelism} at a time")
        provenance = collect()
        record = await sweep_run(args.sweep_trials, args.sweep_parallelism, args.sweep_nodes, limits, say)
        say(f"  {record['sweep_phase']} in {record['wall_s']} s, writes/trial {record['writes_per_trial']}")
        save(record, provenance)
    if args.kueue_jobs:
        for name in (c for c in args.kueue_contenders.split(",") if c):
            shape = f"{args.kueue_jobs}x{args.kueue_workers} through a ClusterQueue of {args.kueue_gpus} GPUs"
            say(f"kueue scenario {shape}: {name}")
            provenance = collect()
            record = await kueue_run(
                name, args.kueue_jobs, args.kueue_workers, args.kueue_gpus, args.kueue_complete_after, limits, say
            )
            say(
                f"  drained in {record['drain_s']} s, occupancy {record['mean_gpu_occupancy']}, admission → Running "
                f"median {record['admission_to_running_median_s']} s, writes/job {record['writes_per_job']}"
            )
            save(record, provenance)
    say(f"wrote {args.out / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments(sys.argv[1:]))))
