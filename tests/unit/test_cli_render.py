"""What the job commands print: ages, the job table, JSON/YAML, describe, and watch's progress line."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from rich.console import Console

from trainingjob.api.readouts import stop_summary
from trainingjob.cli import render, render_describe

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(name: str = "mnist", namespace: str = "team", **status: object) -> dict:
    return {
        "apiVersion": "ml.example.com/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": stamp(330), "uid": "u-1"},
        "spec": {
            "framework": "pytorch",
            "image": "registry.example/train:1",
            "command": ["python"],
            "args": ["train.py", "--note", "two words"],
            "workers": 2,
            "gpuPerWorker": 1,
            "hyperparameters": {"lr": 0.1, "amp": True, "arch": "resnet"},
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (125, "2m5s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_ages_read_like_kubectl(seconds: float, text: str) -> None:
    assert render.human_duration(seconds) == text


def test_age_of_a_timestamp() -> None:
    assert render.age(stamp(330), NOW) == "5m30s"
    assert render.age("2026-03-01T11:59:50.123456+00:00", NOW) == "9s"
    assert render.age(None, NOW) == "<none>" and render.age("yesterday", NOW) == "<none>"


def test_job_rows_and_table() -> None:
    running = job(phase="Running", restartCount=2)
    fresh = job("a-much-longer-name", "other")
    assert render.job_row(running, NOW) == ["mnist", "pytorch", "2", "Running", "2", "5m30s"]
    assert render.job_row(fresh, NOW, all_namespaces=True) == [
        "other",
        "a-much-longer-name",
        "pytorch",
        "2",
        "<none>",
        "0",
        "5m30s",
    ]
    rows = [render.job_row(j, NOW, True) for j in (running, fresh)]
    table = render.format_table(render.job_headers(True), rows).splitlines()
    assert table == [
        "NAMESPACE   NAME                 FRAMEWORK   WORKERS   PHASE     RESTARTS   AGE",
        "team        mnist                pytorch     2         Running   2          5m30s",
        "other       a-much-longer-name   pytorch     2         <none>    0          5m30s",
    ]
    widths = render.column_widths(render.job_headers(False), [])
    assert render.format_row(render.job_headers(False), widths) == "NAME   FRAMEWORK   WORKERS   PHASE   RESTARTS   AGE"


def test_dump_json_and_yaml_round_trip_in_api_order() -> None:
    document = job(phase="Running")
    assert json.loads(render.dump(document, "json")) == document
    text = render.dump(document, "yaml")
    assert yaml.safe_load(text) == document and text.startswith("apiVersion:") and not text.endswith("\n")


def describe_text(document: dict, events: list | None = None) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_describe.describe(document, events or [], NOW))
    return console.export_text()


def test_describe_shows_spec_counters_conditions_workers_and_events() -> None:
    document = job(
        phase="Failed",
        message="worker 1 failed",
        attempt=2,
        restartCount=1,
        disruptionCount=1,
        startTime=stamp(300),
        conditions=[
            {
                "type": "Running",
                "status": "False",
                "reason": "WorkerFailed",
                "message": "m",
                "lastTransitionTime": stamp(60),
            },
            {
                "type": "Failed",
                "status": "True",
                "reason": "WorkerFailed",
                "message": "[red]x",
                "lastTransitionTime": stamp(60),
            },
        ],
        workerStatuses=[
            {"workerId": 1, "podName": "mnist-worker-1", "phase": "Failed", "exitCode": 3, "reason": "Error"},
            {"workerId": 0, "podName": "mnist-worker-0", "phase": "Running", "nodeName": "tj-node-0"},
        ],
        lastFailure={"workerId": 1, "podName": "mnist-worker-1", "exitCode": 3, "reason": "Error", "message": "boom"},
    )
    events = [
        {
            "type": "Warning",
            "reason": "WorkerFailed",
            "message": "worker 1 failed\n",
            "lastTimestamp": stamp(61),
            "count": 2,
            "source": {"component": "trainingjob-operator"},
        }
    ]
    text = describe_text(document, events)
    lines = [line.rstrip() for line in text.splitlines()]
    assert "Name:             mnist" in lines
    assert 'Command:          python train.py --note "two words"' in lines
    assert "Workers:          2 x 1 nvidia.com/gpu" in lines
    assert 'Hyperparameters:  lr=0.1 amp=true arch="resnet"' in lines
    assert "Attempt:          2" in lines and "Restarts:         1" in lines and "Disruptions:      1" in lines
    assert "Last failure:     worker 1 (mnist-worker-1), exit code 3, Error: boom" in lines
    assert lines.index("Conditions:") < lines.index("Workers:") < lines.index("Events:")
    assert any(line.split() == ["Failed", "True", "WorkerFailed", "60s", "[red]x"] for line in lines)  # no markup
    worker_lines = [line.split() for line in lines if "mnist-worker-" in line and not line.startswith("Last")]
    assert worker_lines == [
        ["0", "mnist-worker-0", "Running", "tj-node-0", "0"],
        ["1", "mnist-worker-1", "Failed", "0", "3", "Error"],
    ]
    assert any(
        line.split()[:4] == ["Warning", "WorkerFailed", "61s", "(x2)"] and line.endswith("worker 1 failed")
        for line in lines
    )


def test_describe_shows_where_the_gang_is() -> None:
    gang = {"kind": "Workload", "name": "mnist-gang-1", "state": "Waiting", "placed": 0, "minCount": 2}
    lines = [line.rstrip() for line in describe_text(job(phase="Pending", gang=gang)).splitlines()]
    assert "Gang:             Workload mnist-gang-1: Waiting (0/2 placed)" in lines
    assert not any(line.startswith("Gang:") for line in describe_text(job(phase="Pending")).splitlines())


def test_describe_of_a_fresh_job_says_none() -> None:
    lines = [line.strip() for line in describe_text(job()).splitlines()]
    assert lines.count("<none>") == 3  # conditions, workers, events
    assert "Phase:            <none>" in lines


def test_progress_view_with_and_without_reports() -> None:
    pending = render.progress_view(job(phase="Pending", message="1/2 workers running; cannot schedule"))
    assert pending.percent is None
    assert pending.summary == "Pending · workers 0/2 running · 1/2 workers running; cannot schedule"

    progress = {
        "percent": 42.5,
        "epoch": 3,
        "totalEpochs": 10,
        "metrics": {"loss": 0.41234, "accuracy": 0.87},
        "estimatedRemainingSeconds": 320,
    }
    workers = [{"workerId": 0, "phase": "Running"}, {"workerId": 1, "phase": "Running"}]
    running = render.progress_view(job(phase="Running", message="2/2", workerStatuses=workers, progress=progress))
    assert running.percent == 42.5
    assert running.summary == "Running · workers 2/2 running · 42% · epoch 3/10 · accuracy=0.87 loss=0.4123 · ETA 5m20s"

    by_steps = render.progress_view(job(phase="Running", progress={"step": 50, "totalSteps": 200}))
    assert by_steps.percent == 25.0 and "step 50/200" in by_steps.summary


def test_an_unknown_eta_says_so_and_a_simulated_job_says_so_everywhere() -> None:
    early = render.progress_view(job(phase="Running", progress={"percent": 20.0, "epoch": 2, "totalEpochs": 10}))
    assert early.summary.endswith("epoch 2/10 · ETA unknown")  # too little pace yet: no number rather than a wrong one
    done = render.progress_view(job(phase="Succeeded", progress={"percent": 100.0, "epoch": 10, "totalEpochs": 10}))
    assert "ETA" not in done.summary
    simulated = job(phase="Running", simulated=True)
    assert render.progress_view(simulated).summary.startswith("Running (simulated) · ")
    assert "Running(simulated)" in render.job_row(simulated, NOW)


def test_describe_says_whether_the_last_stop_was_checkpointed() -> None:
    saved = {"path": "/checkpoints/u/ckpt-00000007.json", "epoch": 7}
    stop = {"reason": "Suspended", "time": "2026-11-22T12:00:00Z", "checkpointed": True, "checkpoint": saved}
    assert stop_summary(stop) == "Suspended at 2026-11-22T12:00:00Z: checkpointed /checkpoints/u/ckpt-00000007.json"
    unsaved = {"reason": "SpecChanged", "time": "2026-11-22T12:00:00Z", "checkpointed": False}
    assert stop_summary(unsaved) == "SpecChanged at 2026-11-22T12:00:00Z: no checkpoint saved"
    assert "Last stop" in describe_text(job(phase="Suspended", lastStop=stop))


def test_a_succeeded_job_shows_only_the_progress_that_was_reported() -> None:
    silent = render.progress_view(job(phase="Succeeded"))
    assert silent.percent is None
    assert silent.summary == "Succeeded · no worker running · done (no progress reported)"
    short = render.progress_view(job(phase="Succeeded", progress={"percent": 80.0, "epoch": 4, "totalEpochs": 5}))
    assert short.percent == 80.0 and "80%" in short.summary and "100%" not in short.summary
    full = render.progress_view(job(phase="Succeeded", progress={"epoch": 5, "totalEpochs": 5}))
    assert full.percent == 100.0 and "100% · epoch 5/5" in full.summary


@pytest.mark.parametrize(
    ("progress", "bar_shown"), [(None, False), ({"epoch": 3, "totalEpochs": 4}, True), ({"percent": 100.0}, True)]
)
def test_watch_bar_of_a_succeeded_job_only_from_reports(progress: dict | None, bar_shown: bool) -> None:
    from trainingjob.cli.follow import _Display

    display = _Display("team/mnist")
    display.tty = True
    display.show(job(phase="Succeeded", **({"progress": progress} if progress else {})))
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(display.progress.get_renderable())
    assert ("━" in console.export_text()) is bar_shown


def test_failure_message_prefers_the_failed_condition() -> None:
    failed = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "3 restarts"}
    assert render.failure_message(job(phase="Failed", conditions=[failed])) == "BackoffLimitExceeded: 3 restarts"
    assert render.failure_message(job(phase="Failed", message="why")) == "why"
    last = {"workerId": 0, "exitCode": 137, "reason": "OOMKilled"}
    assert render.failure_message(job(phase="Failed", lastFailure=last)) == "worker 0, exit code 137, OOMKilled"
    assert render.failure_message(job(phase="Failed")) == "no reason recorded"


@pytest.mark.parametrize(
    ("checkpoint", "shown"),
    [
        ({"epoch": 3, "path": "/ckpt/ckpt-00000003.json"}, "epoch 3 /ckpt/ckpt-00000003.json"),
        ({"step": 1200, "epoch": 2}, "epoch 2 step 1200"),
        ({"time": "2026-01-01T00:00:00Z"}, "<none>"),
    ],
)
def test_describe_shows_only_what_a_checkpoint_records(checkpoint: dict, shown: str) -> None:
    assert render_describe.checkpoint_summary(checkpoint) == shown
    assert "?" not in render_describe.checkpoint_summary(checkpoint)


def test_a_finished_job_names_only_the_workers_still_running() -> None:
    def summary(phase: str, *worker_phases: str) -> str:
        statuses = [{"workerId": i, "phase": p} for i, p in enumerate(worker_phases)]
        return render.progress_view(job(phase=phase, workerStatuses=statuses)).summary

    assert summary("Failed", "Terminating", "Failed") == "Failed · no worker running"
    assert summary("Failed", "Running", "Failed") == "Failed · 1 worker still running"  # cleanPodPolicy None
    assert summary("Running", "Running", "Running") == "Running · workers 2/2 running"
