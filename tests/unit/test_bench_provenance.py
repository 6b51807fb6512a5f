"""The benchmark's provenance: what each run records of its code and machine, and the report's refusal to put runs of
different commits in one table; the median run whose request breakdown the report shows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.provenance import (
    UNRECORDED,
    MixedCommits,
    collect,
    commit_of,
    cpu_model,
    git_state,
    memory_gib,
    refuse_mixed_commits,
)
from bench.report import median_run, summarize_throughput, throughput_section, write_report
from bench.scale import growth_section

REPO = Path(__file__).resolve().parents[2]


def run(contender: str, pods_running: float | None, commit: str | None = "a" * 40, dirty: bool = False) -> dict:
    """A throughput record as the harness writes it, with the fields the report reads."""
    record: dict[str, Any] = {
        "kind": "throughput",
        "contender": contender,
        "jobs": 10,
        "workers": 2,
        "finished": pods_running is not None,
        "all_pods_created_s": 1.0,
        "all_pods_running_s": pods_running,
        "all_running_s": pods_running,
        "all_succeeded_s": None,
        "cpu_seconds": {"operator": 1.0},
        "harness_cpu_seconds": 1.0,
        "operator_peak_rss_mib": 80.0,
        "writes_per_job": 5.0,
        "writes_per_job_without_events": 4.0,
        "requests": {"create pods": int(pods_running or 0)},
        "series": [],
    }
    if commit is not None:
        record["provenance"] = {"commit": commit, "dirty": dirty, "date": "2026-11-29T06:00:00+00:00",
                                "cpu_model": "Test CPU", "cpu_count": 2, "memory_gib": 24.0,
                                "load_average": [5.1, 4.0, 3.2], "versions": {"kubernetes": "v1.35.4"}}  # fmt: skip
    return record


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_git_state_names_the_commit_and_sees_an_untracked_file(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "new.py").write_text("y = 2\n")
    assert git_state(tmp_path) == {"commit": head, "dirty": True}


def test_the_reports_own_files_do_not_make_the_tree_dirty(tmp_path: Path) -> None:
    """`--update-docs` rewrites docs/benchmarks.* after each run: the next run of the same sitting is still of a
    clean commit. Any other change under docs/ still counts."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("old\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (tmp_path / "docs" / "benchmarks.md").write_text("new\n")
    (tmp_path / "docs" / "benchmarks.json").write_text("{}\n")
    (tmp_path / "docs" / "benchmarks-running.png").write_bytes(b"png")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "docs" / "other.md").write_text("x\n")
    assert git_state(tmp_path)["dirty"] is True


def test_outside_a_checkout_the_commit_is_unknown_not_guessed(tmp_path: Path) -> None:
    assert git_state(tmp_path / "missing") == {"commit": None, "dirty": None}
    assert commit_of({"provenance": {"commit": None}}) == UNRECORDED


def test_cpu_model_and_memory_are_read_from_proc_text() -> None:
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\n"
    assert cpu_model(cpuinfo) == "AMD EPYC 7B13"
    assert cpu_model("processor\t: 0\nCPU part\t: 0xd0c\n") == "0xd0c"
    assert cpu_model("") == ""
    assert memory_gib("MemTotal:       25165824 kB\nMemFree: 1 kB\n") == 24.0
    with pytest.raises(ValueError):
        memory_gib("MemFree: 1 kB\n")


def test_a_run_records_its_commit_date_machine_and_versions() -> None:
    provenance = collect(REPO)
    assert provenance["commit"] == git(REPO, "rev-parse", "HEAD")
    assert isinstance(provenance["dirty"], bool)
    assert provenance["date"].endswith("+00:00") and provenance["cpu_count"] >= 1 and provenance["memory_gib"] > 0
    assert provenance["cpu_model"] and len(provenance["load_average"]) == 3
    versions = provenance["versions"]
    assert {"etcd", "kubernetes", "kwok", "kubeflow training-operator", "python", "go"} <= versions.keys()
    assert versions["kubernetes"].startswith("v1.")


def test_commit_of_names_a_dirty_tree_and_runs_older_than_provenance() -> None:
    assert commit_of(run("ours", 1.0, "0123456789abcdef")) == "0123456789"
    assert commit_of(run("ours", 1.0, "0123456789abcdef", dirty=True)) == "0123456789+dirty"
    assert commit_of(run("ours", 1.0, None)) == UNRECORDED


def test_runs_of_different_commits_are_refused_unless_asked() -> None:
    same = [run("ours", 1.0), run("raw-pods", 2.0)]
    refuse_mixed_commits(same, allowed=False)
    mixed = [*same, run("ours", 3.0, "b" * 40)]
    with pytest.raises(MixedCommits, match=r"aaaaaaaaaa \(2 runs\), bbbbbbbbbb \(1 run\)"):
        refuse_mixed_commits(mixed, allowed=False)
    with pytest.raises(MixedCommits):
        refuse_mixed_commits([run("ours", 1.0), run("ours", 1.0, dirty=True)], allowed=False)
    with pytest.raises(MixedCommits):
        refuse_mixed_commits([run("ours", 1.0), run("ours", 1.0, None)], allowed=False)
    refuse_mixed_commits(mixed, allowed=True)


def test_the_report_refuses_mixed_commits_before_writing_anything(tmp_path: Path) -> None:
    mixed = [run("trainingjob-operator", 1.0), run("trainingjob-operator", 3.0, "b" * 40)]
    with pytest.raises(MixedCommits):
        write_report(mixed, tmp_path / "out", "preamble\n")
    assert not (tmp_path / "out").exists()
    report = write_report(mixed, tmp_path / "out", "preamble\n", mix_commits=True).read_text()
    assert "**Runs of different commits are reported together**" in report
    assert "This table mixes runs of the commits aaaaaaaaaa, bbbbbbbbbb." in report


def test_the_report_prints_each_runs_provenance_and_not_other_runs_narrative(tmp_path: Path) -> None:
    report = write_report([run("trainingjob-operator", 7.5)], tmp_path, "preamble\n").read_text()
    row = next(line for line in report.splitlines() if line.startswith("| 1 | throughput |"))
    assert "aaaaaaaaaa" in row and "2026-11-29T06:00:00+00:00" in row and "Test CPU, 2 cores" in row
    assert "24 GiB" in row and "5.1 4 3.2" in row
    assert "Component versions: kubernetes v1.35.4." in report
    headings = [line for line in (REPO / "bench/findings.md").read_text().splitlines() if line.startswith("## ")]
    assert headings and not any(heading in report for heading in headings), "bench/findings.md is about other runs"
    recorded = json.loads((tmp_path / "benchmarks.json").read_text())["runs"][0]["provenance"]
    assert recorded["commit"] == "a" * 40


def test_the_median_run_is_the_run_with_the_median_time_not_the_middle_of_the_list() -> None:
    runs = [run("ours", 30.0), run("ours", 10.0), run("ours", 20.0)]
    assert median_run(runs)["all_pods_running_s"] == 20.0, "runs[len // 2] would take the 10 s run"
    assert median_run([run("ours", 40.0), run("ours", 10.0)])["all_pods_running_s"] == 10.0, "the lower middle"
    assert median_run([run("ours", None), run("ours", 5.0), run("ours", 6.0)])["all_pods_running_s"] == 6.0
    records = [run("trainingjob-operator", s) for s in (30.0, 10.0, 20.0)]
    figures = summarize_throughput(records)[(10, 2)]["ours"]
    assert figures["requests"] == {"create pods": 20} and figures["median_run_pods_running"] == 20.0


def test_a_stalled_run_is_marked_in_the_report() -> None:
    record = {**run("raw-pods", None, "a" * 40), "stalled": "nothing changed for 300 s, in the watch or the LISTs"}
    section = throughput_section((10, 2), summarize_throughput([record])[(10, 2)])
    assert "| raw pod creation | 1 (0) |" in section and "raw pod creation — (stalled)" in section


def test_an_operator_run_from_another_checkout_is_an_experiment_naming_its_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The before/after pair of a redesign: the other checkout's code is measured, so its commit is recorded."""
    from bench.contenders import contender

    source = Path(__file__).resolve().parents[2] / "src"
    monkeypatch.setenv("BENCH_OPERATOR_SRC", str(source))
    experiment = contender("ours").experiment
    assert experiment["operator_src"] == str(source)
    assert experiment["operator_commit"] == git_state()["commit"]
    monkeypatch.delenv("BENCH_OPERATOR_SRC")
    assert "operator_commit" not in contender("ours").experiment


def test_a_run_is_kept_when_the_checkout_changed_commit_between_two_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 5,000 x 8 run of raw (25 minutes) was lost so: a commit made in the benchmark's checkout while ours ran made
    the second run's provenance another commit, the report refused the mix and the harness died before saving."""
    import asyncio

    import bench.__main__ as entry
    from tests.unit.test_bench import throughput

    machine = {"date": "2026-11-30T09:00:00+00:00", "cpu_model": "cpu", "cpu_count": 2, "memory_gib": 23.5}
    machine |= {"load_average": [0.1], "versions": {}}
    states = iter([{**machine, "commit": "a" * 40, "dirty": False}, {**machine, "commit": "b" * 40, "dirty": False}])
    monkeypatch.setattr(entry, "collect", lambda: next(states))

    async def measured(name: str, jobs: int, *_: Any) -> dict[str, Any]:
        return throughput(name, jobs, 100.0, 10.0, 90.0, 12.0)

    monkeypatch.setattr(entry, "throughput_run", measured)
    options = ["--out", str(tmp_path), "--jobs", "100", "--repeats", "1", "--contenders", "ours,raw"]
    options += ["--steady-jobs", "0", "--gang-jobs", "0"]
    assert asyncio.run(entry.main(entry.arguments(options))) == 0
    kept = json.loads((tmp_path / "benchmarks.json").read_text())["runs"]
    assert [(run["contender"], run["provenance"]["commit"][0]) for run in kept] == [("ours", "a"), ("raw", "b")]


def test_a_growth_table_whose_scale_steps_measured_different_commits_names_them() -> None:
    one = [run("trainingjob-operator", 5.0, "a" * 40), run("raw-pods", 4.0, "a" * 40)]
    other = [{**r, "jobs": 100} for r in (run("trainingjob-operator", 60.0, "b" * 40), run("raw-pods", 40.0, "b" * 40))]
    mixed = growth_section(summarize_throughput(one + other))
    assert "This table mixes runs of the commits aaaaaaaaaa, bbbbbbbbbb." in mixed
    same = growth_section(summarize_throughput(one + [{**r, "jobs": 100} for r in one]))
    assert "| 100 x 2 |" in same and "mixes" not in same
