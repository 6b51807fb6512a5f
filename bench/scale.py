"""Issue 40's scale step in the report: which scenario the 1000-job targets are judged on, the rows of the
larger ones (5,000 x 8), and how a job's cost grows from 100 to 1,000 to 5,000 jobs."""

from __future__ import annotations

from typing import Any

from bench.cells import fmt, ratio, verdict
from bench.provenance import mixed_commits_line

TARGET_JOBS = 1000  # issue 40's ratio, writes and growth targets are set at 1000 x W
SCALE_STEP_RSS_MIB = 300.0  # issue 40's bound on peak RSS at the next scale step (5,000 x 8)
LEASE_S = 15.0  # the operator's lease_duration: a replacement pod waits it out before it leads
RESTART_S = 15.0  # a restarted operator re-observes every job of 1000 x W within this (the earlier issues' target)
SCALE_STEP_RESTART_S = 30.0  # issue 40: a restart at the next scale step (5,000 x 8) re-observes within this


def target_scenario(summary: dict[tuple[int, int], dict[str, dict[str, Any]]]) -> tuple[int, int]:
    """The scenario the 1000-job targets are judged on: 1000 x W where measured, else the largest one."""
    at_target = [s for s in summary if s[0] == TARGET_JOBS]
    return max(at_target) if at_target else max(summary)


def scale_step_rows(
    summary: dict[tuple[int, int], dict[str, dict[str, Any]]], judged: tuple[int, int]
) -> list[tuple[str, str, str]]:
    """Issue 40's next scale step, for each scenario larger than the one the other targets are judged on: every
    job Running (ours) and the operator's peak RSS within 300 MiB."""
    rows = []
    for scenario in sorted(s for s in summary if s[0] > judged[0]):
        ours = summary[scenario].get("ours")
        if ours is None:
            continue
        where, pods = f"{scenario[0]}x{scenario[1]}", scenario[0] * scenario[1]
        running, finished = ours.get("pods_running"), ours.get("finished", 0) > 0
        rows.append((f"every job's pods Running ({where})", fmt(running, " s"), verdict(running is not None)))
        rss = ours.get("rss")
        ok = None if rss is None else rss <= SCALE_STEP_RSS_MIB
        rows.append((f"peak RSS ≤ {SCALE_STEP_RSS_MIB:g} MiB ({pods} pods)", fmt(rss, " MiB"), verdict(ok)))
        if not finished:
            rows.append((f"every job Succeeded within the run's limit ({where})", "not reached", verdict(False)))
    return rows


def growth_section(summary: dict[tuple[int, int], dict[str, dict[str, Any]]]) -> str:
    """How the cost of a job grows with the number of jobs (issue 40: 100 → 1,000 → 5,000), ours beside raw."""
    scenarios = sorted(s for s in summary if "ours" in summary[s])
    if len(scenarios) < 2:
        return ""
    lines = [
        "## Growth with scale (medians)\n\n",
        "| jobs x workers | ours: all pods Running | per job | raw: per job | ours / raw "
        "| operator peak RSS | writes/job w/o Events |\n",
        "|---|---|---|---|---|---|---|\n",
    ]
    for scenario in scenarios:
        ours, raw = summary[scenario]["ours"], summary[scenario].get("raw", {})
        mine, theirs = ours.get("pods_running"), raw.get("pods_running")
        per_job = None if mine is None else round(mine / scenario[0], 4)
        raw_per_job = None if theirs is None else round(theirs / scenario[0], 4)
        lines.append(
            f"| {scenario[0]} x {scenario[1]} | {fmt(mine, ' s')} | {fmt(per_job, ' s')} | {fmt(raw_per_job, ' s')} "
            f"| {fmt(ratio(mine, theirs), 'x')} | {fmt(ours.get('rss'), ' MiB')} "
            f"| {fmt(ours.get('writes_per_job_without_events'))} |\n"
        )
    # Its rows come from several scale steps, which need not have been run at one commit (`--mix-commits`).
    lines.append(mixed_commits_line(f for s in scenarios for f in summary[s].values()))
    return "".join(lines) + "\n"


def restart_bounds(jobs: int) -> tuple[float, float, str]:
    """(restart bound, replacement pod bound, how the replacement's is named) for a steady run of `jobs` jobs.

    Up to 1000 jobs a restart re-observes within 15 s and a replacement pod within the Lease + 5 s (issue 40,
    "closer to the limit"); at the scale step issue 40 asks a restart to re-observe within 30 s and sets nothing
    for a new Lease identity, so the replacement pod is held to the same 30 s rather than left unjudged."""
    if jobs > TARGET_JOBS:
        return (
            SCALE_STEP_RESTART_S,
            SCALE_STEP_RESTART_S,
            f"{SCALE_STEP_RESTART_S:g} s (the scale step's restart bound)",
        )
    return RESTART_S, LEASE_S + 5, f"the Lease + 5 s = {LEASE_S + 5:g} s"


def restart_rows(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The target rows of one steady run of ours: idle writes, pods recreated, and how soon every job was
    re-observed after a kill -9 (same identity, then a replacement pod), each against its scale's bound."""
    where = f"{record['jobs']}x{record['workers']} Running"
    restart_s, replacement_s, replacement_named = restart_bounds(record["jobs"])
    idle, recreated = record["idle_writes_per_minute"], record["pods_recreated"]
    rows = [
        (f"0 writes per minute when idle ({where}; Lease renewals apart)", fmt(idle), verdict(idle == 0)),
        (f"restart: 0 pods recreated ({where})", str(recreated), verdict(recreated == 0)),
        reobserved_row(f"restart: all re-observed within {restart_s:g} s ({where})", record, "restart", restart_s),
    ]
    if "replacement_ready_s" in record:
        target = f"replacement pod: re-observed within {replacement_named} ({where})"
        rows.append(reobserved_row(target, record, "replacement", replacement_s))
    return rows


def reobserved_row(target: str, record: dict[str, Any], prefix: str, bound: float) -> tuple[str, str, str]:
    """One re-observe target: a restart that never re-observed is a miss with the time it was given."""
    seconds, reached = record[f"{prefix}_reobserved_s"], record[f"{prefix}_reobserved"]
    measured = fmt(seconds, " s") if reached else f"not within {fmt(seconds, ' s')}"
    return target, measured, verdict(reached and seconds <= bound)
