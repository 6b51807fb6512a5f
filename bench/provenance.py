"""Where each run's figures come from: the code (commit, dirty tree), the date, the machine and the component versions.

Why per run and not per file: benchmarks.json used to carry one `machine` field, rewritten on every save, so a figure
could not be traced to the code it measured (an earlier report's HEAD was seven commits past the measured code) nor
told apart from runs appended later on another machine. Each record now carries its own `provenance`, taken when the
run starts, and the report refuses to put runs of different commits in one table unless asked (`--mix-commits`).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UNRECORDED = "unrecorded"  # the commit of a run measured before runs carried their provenance


class MixedCommits(ValueError):
    """Runs of different commits would share a table: their figures measure different code."""


def cpu_model(cpuinfo: str) -> str:
    """The first `model name` of /proc/cpuinfo (x86) or its `Hardware`/`CPU part` lines elsewhere; '' if none."""
    for field_name in ("model name", "Hardware", "CPU part"):
        for line in cpuinfo.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == field_name and value.strip():
                return value.strip()
    return ""


def memory_gib(meminfo: str) -> float:
    """MemTotal of /proc/meminfo in GiB, one decimal."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    raise ValueError("no MemTotal in meminfo")


# The report's own files: `--update-docs` rewrites them after every run, so the second run of one sitting would
# otherwise find the tree dirty and every run after the first would be refused as of a modified commit.
REPORT_FILES_EXCLUDED = tuple(
    f":(exclude)docs/{name}" for name in ("benchmarks.md", "benchmarks.json", "benchmarks-running.png")
)


def git_state(repo: Path = REPO) -> dict[str, Any]:
    """The commit checked out and whether the tree differs from it (untracked files count: a new module changes what
    runs; the report's own files do not). Outside a git checkout (a tarball), both are None rather than a guess."""

    def git(*args: str) -> str | None:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=normal", "--", ".", *REPORT_FILES_EXCLUDED)
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def component_versions() -> dict[str, str]:
    """What a run's figures depend on besides our code: the pinned Go components (control plane, kwok, Kubeflow's
    training-operator), Go, Python and the Python client libraries the operator and the harness use."""
    from bench.kubeflow import KUBEFLOW
    from trainingjob.cluster.build import pinned_versions

    versions = dict(pinned_versions())
    versions["kubeflow training-operator"] = KUBEFLOW.version
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False)
    versions["go"] = go.stdout.strip() if go.returncode == 0 else "unknown"
    versions["python"] = platform.python_version()
    for package in ("trainingjob-operator", "kubernetes_asyncio", "aiohttp"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def collect(repo: Path = REPO) -> dict[str, Any]:
    """The provenance of a run starting now. The load average is recorded too: a run on a shared machine says so."""
    return {
        **git_state(repo),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu_model": cpu_model(Path("/proc/cpuinfo").read_text()) or platform.processor(),
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib(Path("/proc/meminfo").read_text()),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "versions": component_versions(),
    }


def commit_of(record: dict[str, Any]) -> str:
    """A run's commit, short, with '+dirty' when its tree had changes; UNRECORDED for runs older than provenance."""
    provenance = record.get("provenance") or {}
    commit = provenance.get("commit")
    if not commit:
        return UNRECORDED
    return commit[:10] + ("+dirty" if provenance.get("dirty") else "")


def commits(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Each commit (as commit_of names it) and how many runs measured it, in first-seen order."""
    counts: dict[str, int] = {}
    for record in records:
        name = commit_of(record)
        counts[name] = counts.get(name, 0) + 1
    return counts


def counted(seen: dict[str, int]) -> str:
    """'abc (2 runs), def (1 run)': each commit with how many runs measured it."""
    return ", ".join(f"{name} ({count} run{'' if count == 1 else 's'})" for name, count in seen.items())


def refuse_mixed_commits(records: Iterable[dict[str, Any]], allowed: bool) -> None:
    """Raise MixedCommits when the runs measured more than one commit (a dirty tree is not its commit) and mixing
    was not asked for: a median over two versions of the code measures neither."""
    seen = commits(records)
    if len(seen) > 1 and not allowed:
        listed = counted(seen)
        raise MixedCommits(
            f"the runs measured different code: {listed}. Report one commit's runs (a new --out directory, or "
            "without --append), or pass --mix-commits to put them in one table anyway (the report then names them)."
        )


def provenance_lines(records: list[dict[str, Any]], legacy_machine: dict[str, str] | None) -> str:
    """The report's provenance section: one row per run, then each distinct set of component versions."""
    lines = [
        "| # | kind | contender | jobs x workers | commit | date (UTC) | CPU | memory | load at start |\n",
        "|---|---|---|---|---|---|---|---|---|\n",
    ]
    version_sets: list[dict[str, str]] = []
    for number, record in enumerate(records, 1):
        provenance = record.get("provenance") or {}
        cpu = f"{provenance['cpu_model']}, {provenance['cpu_count']} cores" if provenance else "—"
        memory = f"{provenance['memory_gib']:g} GiB" if provenance else "—"
        load = " ".join(f"{value:g}" for value in provenance.get("load_average", [])) or "—"
        lines.append(
            f"| {number} | {record['kind']} | {record['contender']} | {record.get('jobs')} x {record.get('workers')} "
            f"| {commit_of(record)} | {provenance.get('date', '—')} | {cpu} | {memory} | {load} |\n"
        )
        versions = provenance.get("versions")
        if versions and versions not in version_sets:
            version_sets.append(versions)
    for versions in version_sets:
        lines.append(
            "\nComponent versions: " + ", ".join(f"{name} {value}" for name, value in versions.items()) + ".\n"
        )
    if legacy_machine and any(not r.get("provenance") for r in records):
        described = ", ".join(f"{name}: {value}" for name, value in legacy_machine.items())
        lines.append(f"\nRuns without provenance ({UNRECORDED}) were recorded before runs carried it; the file said: "
                     f"{described}.\n")  # fmt: skip
    return "".join(lines)


def mixed_commits_line(figures: Iterable[dict[str, Any]]) -> str:
    """The line under a table whose rows (figures with their `commits`) measured more than one commit; else ''."""
    measured = {commit for figure in figures for commit in figure.get("commits", {})}
    return f"\nThis table mixes runs of the commits {', '.join(sorted(measured))}.\n" if len(measured) > 1 else ""
