"""The sweep scenario's pure parts (bench/sweep.py): the per-trial arithmetic, the report's table, the sweep it
creates, the objective the simulated workers report, and the reconcile counts read from the operator's /metrics."""

from __future__ import annotations

from typing import Any

import pytest

from bench.report import write_report
from bench.sweep import (
    EPOCHS,
    SweepOperator,
    Trials,
    accuracy,
    per_trial,
    reconciles_by_controller,
    sweep_manifest,
    sweep_section,
)
from trainingjob.api import constants as k
from trainingjob.operator.metrics import OperatorMetrics

TALLY = {
    "create trainingjobs": 100,
    "patch trainingsweeps/status": 250,
    "patch trainingjobs/status": 600,
    "create pods": 100,
    "create events": 300,
    "update leases": 40,
    "get pods": 7,
    "list trainingjobs": 2,
}


def test_per_trial_divides_every_write_by_the_trials_and_leaves_reads_and_lease_renewals_out() -> None:
    figures = per_trial(TALLY, {"TrainingSweep": 420, "TrainingJob": 1800}, 100)
    assert figures["reconciles_per_trial"] == {"TrainingJob": 18.0, "TrainingSweep": 4.2}
    assert figures["writes_per_trial_by_kind"] == {
        "create events": 3.0,
        "create pods": 1.0,
        "create trainingjobs": 1.0,
        "patch trainingjobs/status": 6.0,
        "patch trainingsweeps/status": 2.5,
        "update leases": 0.4,
    }
    assert figures["writes_per_trial"] == 13.5  # 1350 writes, the 40 Lease renewals not among them
    assert figures["writes_per_trial_without_events"] == 10.5
    assert "get pods" not in figures["writes_by_kind"]


def test_per_trial_refuses_a_run_without_trials() -> None:
    with pytest.raises(ValueError, match="at least one trial"):
        per_trial(TALLY, {}, 0)


def test_reconciles_are_read_per_controller_from_the_operators_own_counter() -> None:
    metrics = OperatorMetrics()
    for _ in range(3):
        metrics.reconciles.labels("TrainingSweep").inc()
    metrics.reconciles.labels("TrainingJob").inc()
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    assert reconciles_by_controller(text) == {"TrainingSweep": 3, "TrainingJob": 1}
    assert reconciles_by_controller("") == {}


def test_the_sweep_runs_n_trials_p_at_a_time_without_pruning_and_fails_no_trial_away() -> None:
    manifest = sweep_manifest(100, 10)
    spec = manifest["spec"]
    assert (manifest["apiVersion"], manifest["kind"]) == (k.SWEEP_API_VERSION, k.SWEEP_KIND)
    assert (spec["maxTrials"], spec["parallelism"], spec["maxFailedTrials"]) == (100, 10, 100)
    assert spec["earlyStopping"] == {"pruner": "none"}
    assert spec["objective"]["metric"] == "accuracy"
    assert spec["trialTemplate"]["spec"]["numWorkers"] == 1


def test_the_objective_is_deterministic_best_near_its_optimum_and_rises_with_the_epochs() -> None:
    best = {"learningRate": 0.1, "maxDepth": 4}
    assert accuracy(best, EPOCHS) == 0.95
    assert accuracy({"learningRate": "0.01", "maxDepth": "1"}, EPOCHS) < accuracy(best, EPOCHS)
    assert accuracy(best, 1) < accuracy(best, EPOCHS)


def test_the_sweeps_operator_serves_its_progress_endpoint_on_localhost() -> None:
    args = SweepOperator().endpoint_args()
    port = args[args.index("--progress-port") + 1]
    assert args[args.index("--progress-url") + 1] == f"https://127.0.0.1:{port}"
    assert args[args.index("--progress-bind") + 1] == "127.0.0.1"


def trial(name: str, phase: str, percent: float) -> dict[str, Any]:
    return {
        "apiVersion": f"{k.GROUP}/{k.V1}",
        "kind": k.KIND,
        "metadata": {"name": name},
        "spec": {"hyperparameters": {"learningRate": 0.2}},
        "status": {"state": phase, "progress": f"{percent:g}%", "progressDetails": {"percent": percent}},
    }


def test_the_watch_tells_when_a_trials_reports_reached_its_status_and_when_the_sweep_ended() -> None:
    seen = Trials()
    seen.on_trial("ADDED", trial("s-trial-0", "Running", 50))
    assert seen.phase["s-trial-0"] == "Running" and not seen.recorded("s-trial-0").is_set()
    seen.on_trial("MODIFIED", trial("s-trial-0", "Running", 100))
    assert seen.recorded("s-trial-0").is_set()
    assert seen.hyperparameters["s-trial-0"] == {"learningRate": 0.2}
    assert not seen.done()
    seen.on_sweep("MODIFIED", {"status": {"phase": "Succeeded", "trialsCreated": 1}})
    assert seen.done() and seen.summary()["trialsCreated"] == 1 and seen.events == 3


def record(trials: int = 100, finished: bool = True) -> dict[str, Any]:
    return {
        "kind": "sweep",
        "contender": "ours",
        "trials": trials,
        "jobs": trials,
        "workers": 1,
        "parallelism": 10,
        "nodes": 4,
        "epochs": EPOCHS,
        "finished": finished,
        "stalled": None if finished else "nothing changed for 300 s",
        "sweep_phase": "Succeeded" if finished else "Running",
        "trials_succeeded": trials,
        "trials_failed": 0,
        "trials_counted": trials,
        "wall_s": 321.5,
        "operator_peak_rss_mib": 180.2,
        "provenance": {
            **{"commit": "0123456789abcdef", "dirty": False, "load_average": [3.1, 2.9, 2.5]},
            **{"cpu_model": "test CPU", "cpu_count": 2, "memory_gib": 8.0, "date": "2026-11-29T07:00:00+00:00"},
        },
        **per_trial(TALLY, {"TrainingSweep": 420, "TrainingJob": 1800}, trials),
    }


def test_the_report_table_gives_each_figure_per_trial_with_the_runs_commit_load_and_outcome() -> None:
    section = sweep_section([record(trials=20, finished=False), record()])
    assert "### One TrainingSweep, 100 trials, 10 at a time" in section
    assert "Commit `0123456789ab`, load average [3.1, 2.9, 2.5]" in section
    assert "Sweep Succeeded (finished) in 321.5 s" in section
    assert "| reconciles, TrainingSweep controller | 4.2 |" in section
    assert "| `patch trainingsweeps/status` | 2.5 |" in section
    assert "| **writes in all** (no Lease renewals) | **13.5** |" in section
    assert "**did not finish** (nothing changed for 300 s)" in section  # the 20-trial run, shown as it ended
    assert sweep_section([{"kind": "gang"}]) == ""


def test_the_written_report_includes_the_sweep_table(tmp_path) -> None:
    write_report([record()], tmp_path, "# Benchmarks\n")
    assert "## Sweeps: what the sweep controller costs per trial" in (tmp_path / "benchmarks.md").read_text()
