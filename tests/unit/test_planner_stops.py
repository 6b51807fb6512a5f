"""status.lastStop through the planner: a suspend or a restart records the stop it starts, the workers' stop report
(sdk.on_stop) marks it checkpointed, and the resume says what the workers start from; and status.simulated."""

from __future__ import annotations

import datetime
import json
from typing import Any

from tests.unit.test_planner import CONFIG, NOW, NOW_TEXT, children, make_job, pod, stored
from trainingjob.progress.report import parse_report
from trainingjob.reconcile.observed import ObservedChildren
from trainingjob.reconcile.planner import plan
from trainingjob.reconcile.stops import resume_source, stop_reported

LATER = NOW + datetime.timedelta(seconds=4)
RUNNING = {"phase": "Running", "startTime": "2026-11-22T11:00:00Z", "attempt": 0}


def report(body: dict[str, Any]) -> Any:
    return parse_report(json.dumps(body).encode(), LATER)


def test_a_suspend_records_the_stop_and_the_stop_report_marks_it_checkpointed() -> None:
    running = make_job(status=RUNNING, suspend=True)
    suspended = stored(plan(running, children(running, pod(running, 0), pod(running, 1)), NOW, CONFIG))
    assert suspended["phase"] == "Suspended"
    assert suspended["lastStop"] == {"reason": "Suspended", "time": NOW_TEXT, "checkpointed": False}

    # Worker 0 saved epoch 7 on its way out; its pod is being deleted when the report arrives.
    job = make_job(status=suspended, suspend=True)
    saved = {"epoch": 7, "path": "/checkpoints/uid-1/ckpt-00000007.json"}
    stopped = report({"stopped": True, "epoch": 7, "totalEpochs": 12, "checkpoint": saved})
    going = children(job, pod(job, 0, deleting=True), progress=stopped)
    status = stored(plan(job, going, LATER, CONFIG))
    assert status["lastStop"] == {
        "reason": "Suspended",
        "time": NOW_TEXT,
        "checkpointed": True,
        "checkpoint": {**saved, "time": "2026-11-22T12:00:04Z"},
    }
    assert status["lastCheckpoint"]["path"] == saved["path"]
    assert "progress" not in status  # progress stays where the job was suspended (none was reported before)

    resumed = plan(make_job(status=status, suspend=False), ObservedChildren(), LATER, CONFIG)
    (event,) = [e for e in resumed.events if e.reason == "Resumed"]
    assert event.message == (
        "spec.suspend is false: recreating the workers, from checkpoint "
        "/checkpoints/uid-1/ckpt-00000007.json, saved when they were stopped"
    )


def test_a_suspend_without_running_workers_stops_nothing() -> None:
    queued = make_job(suspend=True)
    assert "lastStop" not in stored(plan(queued, children(queued), NOW, CONFIG))


def test_a_scale_records_its_stop_and_a_stop_without_a_checkpoint_stays_unchecked() -> None:
    paced = {
        "percent": 40.0,
        "epoch": 4,
        "recent": [{"percent": 40.0, "time": NOW_TEXT}],
        "estimatedRemainingSeconds": 60,
    }
    old = make_job(status={**RUNNING, "workerSpec": {"generation": 1}, "progress": paced}, workers=2)
    pods = [pod(old, 0, fingerprint="old"), pod(old, 1, fingerprint="old")]
    scaled = make_job(status=old.status, workers=3)
    status = stored(plan(scaled, children(scaled, *pods), NOW, CONFIG))
    assert status["lastStop"] == {"reason": "SpecChanged", "time": NOW_TEXT, "checkpointed": False}
    # What was reached stays; the pace was the old gang's: the new attempt's ETA is unknown until it has its own.
    assert status["progress"] == {"percent": 40.0, "epoch": 4}
    assert stop_reported(status["lastStop"], report({"stopped": True})) == status["lastStop"]


def test_what_a_resume_starts_from_in_words() -> None:
    checkpoint = {"lastCheckpoint": {"path": "/c/u/ckpt-00000003"}}
    unchecked = {"lastStop": {"reason": "Suspended", "checkpointed": False}}
    assert resume_source(None, None) == "from their start, there being no checkpoint"
    assert resume_source(None, checkpoint["lastCheckpoint"]) == "from the last checkpoint, /c/u/ckpt-00000003"
    assert resume_source(unchecked["lastStop"], checkpoint["lastCheckpoint"]) == (
        "from the last checkpoint, /c/u/ckpt-00000003; they saved none when they were stopped"
    )
    stop = stop_reported(None, report({"stopped": True, "checkpoint": {"path": "/c/u/ckpt-00000004"}}))
    assert stop is not None and stop["reason"] == "WorkerStopped"  # a stop the operator did not start
    assert resume_source(stop, checkpoint["lastCheckpoint"]).endswith(
        "/c/u/ckpt-00000004, saved when they were stopped"
    )


def test_a_job_whose_workers_a_simulator_plays_is_labelled_simulated_for_good() -> None:
    job = make_job(status=RUNNING)
    played = children(job, pod(job, 0, simulated=True), pod(job, 1, simulated=True))
    status = stored(plan(job, played, NOW, CONFIG))
    assert status["simulated"] is True
    finished = make_job(status={**status, "phase": "Succeeded"})
    assert stored(plan(finished, children(finished), NOW, CONFIG))["simulated"] is True  # no pods left: still true
    real = make_job(status=RUNNING)
    assert "simulated" not in stored(plan(real, children(real, pod(real, 0), pod(real, 1)), NOW, CONFIG))


def test_a_report_that_comes_with_the_restart_leaves_no_pace_behind() -> None:
    """The report is folded after the restart is decided (planner.plan_job): had it kept the old gang's points, the
    new attempt's first status would show the old pace's ETA."""
    recent = [{"percent": 10.0 * n, "time": f"2026-11-22T11:59:{50 + n}Z"} for n in (1, 2, 3)]
    paced = {"percent": 30.0, "epoch": 3, "recent": recent, "estimatedRemainingSeconds": 20}
    old = make_job(status={**RUNNING, "workerSpec": {"generation": 1}, "progress": paced}, workers=2)
    scaled = make_job(status=old.status, workers=3)
    newest = report({"epoch": 4, "totalEpochs": 10})
    pods = [pod(old, 0, fingerprint="old"), pod(old, 1, fingerprint="old")]
    status = stored(plan(scaled, children(scaled, *pods, progress=newest), NOW, CONFIG))
    assert status["lastStop"]["reason"] == "SpecChanged"
    assert status["progress"]["epoch"] == 4 and status["progress"]["percent"] == 40.0
    assert "recent" not in status["progress"] and "estimatedRemainingSeconds" not in status["progress"]
