"""What the UI's lists carry of a job's queue and of a sweep (pure summaries of the API objects)."""

from __future__ import annotations

from trainingjob.ui.store import summary
from trainingjob.ui.sweeps import sweep_summary


def test_a_job_row_carries_its_queue_as_status_says_it_and_none_without_kueue() -> None:
    queue = {"name": "team-a", "workload": "w", "admitted": False, "reason": "Pending", "queuedSince": "t"}
    row = summary({"metadata": {"name": "j"}, "status": {"phase": "Queued", "queue": queue}})
    assert row["queue"] == {
        "name": "team-a",
        "clusterQueue": None,
        "admitted": False,
        "reason": "Pending",
        "queuedSince": "t",
        "queuedSeconds": None,
    }
    assert summary({"metadata": {"name": "j"}})["queue"] is None


def test_a_sweep_row_counts_trials_and_names_the_best() -> None:
    sweep = {
        "metadata": {"namespace": "ns", "name": "s", "creationTimestamp": "t"},
        "spec": {"maxTrials": 8, "objective": {"metric": "accuracy"}},
        "status": {
            "phase": "Running",
            "trialsDone": 3,
            "trialsRunning": 2,
            "trialsPruned": 1,
            "bestTrial": {"name": "s-trial-2", "index": 2, "value": 0.9, "parameters": {"lr": 0.1}},
        },
    }
    row = sweep_summary(sweep)
    assert (row["done"], row["running"], row["pruned"], row["failed"]) == (3, 2, 1, 0)
    assert row["direction"] == "maximize" and row["metric"] == "accuracy" and row["maxTrials"] == 8
    assert row["best"] == {"name": "s-trial-2", "index": 2, "value": 0.9}
    assert sweep_summary({"metadata": {"name": "p"}})["phase"] == "Pending"
