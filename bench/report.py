"""docs/benchmarks.md, the raw JSON and a plot, from the run records; medians over repeats, targets stated plainly."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.cells import fmt, ratio, verdict
from bench.gang import gang_section
from bench.provenance import commits, counted, mixed_commits_line, provenance_lines, refuse_mixed_commits
from bench.queue_figures import kueue_section
from bench.scale import growth_section, restart_rows, scale_step_rows, target_scenario
from bench.sweep import sweep_section

LABELS = {
    "ours": "trainingjob-operator",
    "kubeflow-default": "Kubeflow (defaults)",
    "kubeflow-tuned": "Kubeflow (tuned)",
    "raw": "raw pod creation",
    "raw-children": "raw + the same children",
}
NAMES = {"trainingjob-operator": "ours", "raw-pods": "raw"}


def key(record: dict[str, Any]) -> str:
    return NAMES.get(record["contender"], record["contender"])


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


RUNNING_KEY = "all_pods_running_s"  # what the ratios compare, and what orders runs for the median


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose "all pods Running" is the median (the lower of the two middle ones for an even count), so a
    breakdown shown for "the median run" belongs to it. Runs that never got all pods Running rank last: they were
    the slowest. `runs[len // 2]` was the middle of the runs in recorded order, any of them."""

    def rank(run: dict[str, Any]) -> tuple[bool, float]:
        seconds = run.get("all_pods_running_s")
        return (seconds is None, seconds or 0.0)

    ordered = sorted(runs, key=rank)
    return ordered[(len(ordered) - 1) // 2]


def summarize_throughput(records: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, dict[str, Any]]]:
    """(jobs, workers) -> contender -> median figures."""
    grouped: dict[tuple[int, int], dict[str, list[dict[str, Any]]]] = {}
    for record in records:
        if record["kind"] == "throughput":
            grouped.setdefault((record["jobs"], record["workers"]), {}).setdefault(key(record), []).append(record)
    summary: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for scenario, by_contender in sorted(grouped.items()):
        for name, runs in by_contender.items():
            jobs = scenario[0]
            operator_cpu = median(r["cpu_seconds"].get("operator") for r in runs)
            summary.setdefault(scenario, {})[name] = {
                "runs": len(runs),
                "finished": sum(1 for r in runs if r["finished"]),
                "created": median(r["all_pods_created_s"] for r in runs),
                "pods_running": median(r.get("all_pods_running_s") for r in runs),
                "running": median(r["all_running_s"] for r in runs),
                "succeeded": median(r["all_succeeded_s"] for r in runs),
                "operator_cpu": operator_cpu,
                "cpu_per_job": round(operator_cpu / jobs, 3) if operator_cpu is not None else None,
                "apiserver_cpu": median(r["cpu_seconds"].get("kube-apiserver") for r in runs),
                "etcd_cpu": median(r["cpu_seconds"].get("etcd") for r in runs),
                "harness_cpu": median(r["harness_cpu_seconds"] for r in runs),
                "rss": median(r["operator_peak_rss_mib"] for r in runs),
                "writes_per_job": median(r["writes_per_job"] for r in runs),
                "writes_per_job_without_events": median(r["writes_per_job_without_events"] for r in runs),
                "requests": median_run(runs)["requests"],
                "status_patch_fields": median_run(runs).get("status_patch_fields_per_job"),
                "median_run_pods_running": median_run(runs).get("all_pods_running_s"),
                "commits": commits(runs),
                "each_run": [(r.get(RUNNING_KEY), r.get("forced_watch_closes"), r.get("stalled")) for r in runs],
            }
    return summary


THROUGHPUT_HEADER = (
    "| contender | runs (finished) | all pods created | all pods Running | all jobs Running (status) "
    "| all Succeeded | operator CPU | CPU/job | API server CPU | etcd CPU | operator peak RSS "
    "| writes/job (w/o Events) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def each_run_line(figures: dict[str, dict[str, Any]]) -> str:
    """Every run's "all pods Running", with the watchers the API server closed for falling behind where counted:
    medians of two or three runs hide how far apart single runs are here."""
    parts = []
    for name in LABELS:
        runs = figures.get(name, {}).get("each_run") or []
        shown = [
            fmt(running, " s") + (f" ({closes})" if closes is not None else "") + (" (stalled)" if stalled else "")
            for running, closes, stalled in runs
        ]
        if shown:
            parts.append(f"{LABELS[name]} {', '.join(shown)}")
    if not parts:
        return ""
    return (
        "\nEach run's all pods Running (in brackets: watchers the API server closed for falling behind, where "
        f"counted): {'; '.join(parts)}.\n"
    )


def throughput_section(scenario: tuple[int, int], figures: dict[str, dict[str, Any]]) -> str:
    jobs, workers = scenario
    lines = [f"### {jobs} jobs x {workers} workers ({jobs * workers} pods)\n\n", THROUGHPUT_HEADER]
    for name in LABELS:
        if name not in figures:
            continue
        f = figures[name]
        lines.append(
            f"| {LABELS[name]} | {f['runs']} ({f['finished']}) | {fmt(f['created'], ' s')} "
            f"| {fmt(f['pods_running'], ' s')} | {fmt(f['running'], ' s')} "
            f"| {fmt(f['succeeded'], ' s')} | {fmt(f['operator_cpu'], ' s')} | {fmt(f['cpu_per_job'], ' s')} "
            f"| {fmt(f['apiserver_cpu'], ' s')} | {fmt(f['etcd_cpu'], ' s')} | {fmt(f['rss'], ' MiB')} "
            f"| {fmt(f['writes_per_job'])} ({fmt(f['writes_per_job_without_events'])}) |\n"
        )
    ours = figures.get("ours", {})
    comparisons = []
    for other in ("raw", "raw-children", "kubeflow-default", "kubeflow-tuned"):
        if other in figures:
            r = ratio(ours.get("pods_running"), figures[other]["pods_running"])
            comparisons.append(f"ours/{LABELS[other]} = {fmt(r)}")
    if comparisons:
        lines.append(f"\nTime until every job's pods all run, ratios: {'; '.join(comparisons)}.\n")
    lines.append(each_run_line(figures))
    if ours.get("requests"):
        top = sorted(ours["requests"].items(), key=lambda item: -item[1])
        which = fmt(ours.get("median_run_pods_running"), " s")
        lines.append(
            f"\nOur operator's requests in its median run (all pods Running in {which}): "
            + ", ".join(f"{k} {v}" for k, v in top)
            + ".\n"
        )
    if ours.get("status_patch_fields"):
        lines.append(
            "\nIts status patches per job in that run, by the top-level status field each changed (a patch counts "
            "once for each field): "
            + ", ".join(f"{name} {count:g}" for name, count in ours["status_patch_fields"].items())
            + ".\n"
        )
    lines.append(mixed_commits_line(figures.values()))
    return "".join(lines)


def steady_section(records: list[dict[str, Any]]) -> str:
    steady = [r for r in records if r["kind"] == "steady"]
    if not steady:
        return "No steady-state run was recorded.\n"
    lines = [
        "| contender | jobs x workers | idle writes/min (with Lease) | restart: ready | restart: all re-observed "
        "| pods recreated | pods deleted | peak RSS after restart |\n|---|---|---|---|---|---|---|---|\n"
    ]
    for r in steady:
        lines.append(
            f"| {LABELS[key(r)]} | {r['jobs']} x {r['workers']} | {fmt(r['idle_writes_per_minute'])} "
            f"({fmt(r['idle_writes_per_minute_with_lease'])}) | {fmt(r['restart_ready_s'], ' s')} "
            f"| {fmt(r['restart_reobserved_s'], ' s') if r['restart_reobserved'] else 'not reached'} "
            f"| {r['pods_recreated']} | {r['pods_deleted_after_restart']} "
            f"| {fmt(r['restarted_peak_rss_mib'], ' MiB')} |\n"
        )
        if "replacement_ready_s" in r:  # the operator again as a new pod, which waits out the dead holder's Lease
            lines.append(
                f"| {LABELS[key(r)]}, replacement pod | {r['jobs']} x {r['workers']} | — "
                f"| {fmt(r['replacement_ready_s'], ' s')} "
                f"| {fmt(r['replacement_reobserved_s'], ' s') if r['replacement_reobserved'] else 'not reached'} "
                f"| {r['replacement_pods_recreated']} | {r['replacement_pods_deleted']} "
                f"| {fmt(r['replacement_peak_rss_mib'], ' MiB')} |\n"
            )
    return "".join(lines)


def plot(records: list[dict[str, Any]], path: Path) -> bool:
    """Jobs Running over time in the largest scenario, one line per contender (its first run)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    throughput = [r for r in records if r["kind"] == "throughput"]
    if not throughput:
        return False
    largest = max((r["jobs"], r["workers"]) for r in throughput)
    figure, axes = plt.subplots(figsize=(9, 4.5), dpi=110)
    seen = set()
    for record in throughput:
        name = key(record)
        if (record["jobs"], record["workers"]) != largest or name in seen:
            continue
        seen.add(name)
        times, running = zip(*record["series"], strict=True) if record.get("series") else ((), ())  # old files: none
        axes.plot(times, running, label=LABELS[name])
    axes.set(
        xlabel="seconds since the first create",
        ylabel="jobs Running, as each job's status says\n(raw: all its pods running)",
        title=f"{largest[0]} jobs x {largest[1]} workers",
    )
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return True


def targets(summary: dict[tuple[int, int], dict[str, dict[str, Any]]], records: list[dict[str, Any]]) -> str:
    """The issue's targets, each against the largest scenario measured (named, so nothing is implied)."""
    rows = []
    if summary:
        scenario = target_scenario(summary)
        figures, workers = summary[scenario], scenario[1]
        ours = figures.get("ours", {})
        where = f"{scenario[0]}x{workers}"
        for other, limit in (("raw", 1.3), ("raw-children", 1.1), ("kubeflow-default", 0.8), ("kubeflow-tuned", 0.8)):
            r = ratio(ours.get("pods_running"), figures.get(other, {}).get("pods_running"))
            rows.append(
                (
                    f"create → all pods Running ≤ {limit}x {LABELS[other]} ({where})",
                    fmt(r, "x"),
                    verdict(None if r is None else r <= limit),
                )
            )
        w = ours.get("writes_per_job_without_events")  # the target counts writes without Events
        rows.append(
            (
                f"writes per job, without Events, ≤ W + 5 = {workers + 5} ({where})",
                fmt(w),
                verdict(None if w is None else w <= workers + 5),
            )
        )
        rss = ours.get("rss")
        pods = scenario[0] * workers
        rows.append(
            (f"peak RSS ≤ 150 MiB ({pods} pods)", fmt(rss, " MiB"), verdict(None if rss is None else rss <= 150))
        )
        for other in ("kubeflow-default", "kubeflow-tuned"):
            theirs = figures.get(other, {}).get("cpu_per_job")
            mine = ours.get("cpu_per_job")
            measured = f"{fmt(mine, ' s')} vs {fmt(theirs, ' s')}"
            ok = None if mine is None or theirs is None else mine <= theirs
            rows.append((f"CPU seconds per job ≤ {LABELS[other]}'s ({where})", measured, verdict(ok)))
        small = [s for s in summary if s[1] == workers and s != scenario]
        if small:
            base = min(small)
            before, after = summary[base].get("ours", {}).get("pods_running"), ours.get("pods_running")
            growth = None
            if before and after:
                growth = round((after / scenario[0]) / (before / base[0]) - 1, 3)
            rows.append((
                f"time per job grows ≤ 10 % from {base[0]} to {scenario[0]} jobs",
                fmt(None if growth is None else round(growth * 100, 1), " %"),
                verdict(None if growth is None else growth <= 0.10),
            ))  # fmt: skip
        rows += scale_step_rows(summary, scenario)
    for r in (r for r in records if r["kind"] == "steady" and key(r) == "ours"):
        rows += restart_rows(r)
    lines = ["| target | measured | |\n|---|---|---|\n"]
    lines += [f"| {target} | {measured} | {state} |\n" for target, measured, state in rows]
    return "".join(lines)


EXPERIMENT_KEYS = ("operator_args", "kubeflow_pod", "job_version")


def defaults_only(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of each contender as shipped: a run of an experiment (BENCH_OPERATOR_ARGS, recorded as
    operator_args; BENCH_KUBEFLOW_POD, recorded as kubeflow_pod; BENCH_JOB_VERSION, recorded as job_version) stays
    in benchmarks.json but out of the tables and targets."""
    return [record for record in records if not any(record.get(key) for key in EXPERIMENT_KEYS)]


def write_runs(records: list[dict[str, Any]], out: Path, legacy_machine: dict[str, str] | None = None) -> None:
    """benchmarks.json alone: every run recorded, whether or not a report may be made of them."""
    out.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {"runs": records}
    if legacy_machine:
        document["machine"] = legacy_machine
    (out / "benchmarks.json").write_text(json.dumps(document, indent=1) + "\n")


def write_report(
    records: list[dict[str, Any]],
    out: Path,
    preamble: str,
    legacy_machine: dict[str, str] | None = None,
    mix_commits: bool = False,
) -> Path:
    """benchmarks.md + benchmarks.json + benchmarks-running.png in `out`. Every record carries its own provenance;
    `legacy_machine` is what a file of runs older than that said of its one machine (kept, never rewritten with this
    machine's). Raises MixedCommits before writing anything when the runs measured different commits, unless
    `mix_commits`. The narrative of earlier runs (bench/findings.md) is not appended: it is about other runs."""
    refuse_mixed_commits(records, mix_commits)
    write_runs(records, out, legacy_machine)
    all_runs, records = records, defaults_only(records)
    plotted = plot(records, out / "benchmarks-running.png")
    summary = summarize_throughput(records)
    measured = commits(all_runs)
    parts = [preamble, "\n## Provenance\n\n"]
    parts.append(f"Commits measured: {counted(measured) or 'none'}.")
    if len(measured) > 1:
        parts.append(" **Runs of different commits are reported together** (`--mix-commits`): see each table.")
    parts += ["\n\n", provenance_lines(all_runs, legacy_machine)]
    parts += ["\n## Targets\n\n", targets(summary, records), "\n## Throughput (medians)\n\n"]
    parts += [throughput_section(scenario, figures) + "\n" for scenario, figures in summary.items()]
    parts.append(growth_section(summary))
    parts += [
        "## Steady state and restart\n\n",
        steady_section(records),
        "\n",
        gang_section(records),
        sweep_section(records),
        kueue_section(records),
    ]
    if plotted:
        parts.append("\n## Jobs Running over time\n\n![jobs Running over time](benchmarks-running.png)\n")
    parts.append(
        "\nWhat earlier runs found, dated and about those runs, not these, is in the repository's "
        "`bench/findings.md`.\n"
    )
    path = out / "benchmarks.md"
    path.write_text("".join(parts))
    return path
