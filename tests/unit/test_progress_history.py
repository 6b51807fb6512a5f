"""status.progress.history: per-epoch values of the metrics a job names, bounded, and kept across merged reports
(pure, no server)."""

from __future__ import annotations

import datetime
import json

from trainingjob.api import constants as c
from trainingjob.api.types import TrainingJob
from trainingjob.progress.history import HISTORY_POINTS, history_names, recorded, thinned
from trainingjob.progress.report import Report, merge_reports, parse_report, progress_status

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def parse(body: object) -> Report:
    return parse_report(json.dumps(body).encode(), NOW)


def test_the_annotation_names_at_most_four_valid_metrics() -> None:
    annotation = {c.ANNOTATION_METRIC_HISTORY: " accuracy, loss,,bad name,<b>,accuracy,a,b,c"}
    assert history_names(annotation) == ("accuracy", "loss", "a", "b")
    assert history_names({}) == ()
    assert history_names(None) == ()


def test_each_epoch_is_recorded_once_and_a_repeated_epoch_takes_the_newer_value() -> None:
    status: dict = {}
    for epoch, accuracy in ((1, 0.5), (2, 0.6), (2, 0.65), (3, 0.7)):
        status = progress_status(parse({"epoch": epoch, "metrics": {"accuracy": accuracy}}), status, None, ["accuracy"])
    assert status["history"] == {
        "accuracy": [{"epoch": 1, "value": 0.5}, {"epoch": 2, "value": 0.65}, {"epoch": 3, "value": 0.7}]
    }


def test_without_named_metrics_no_history_is_written() -> None:
    status = progress_status(parse({"epoch": 1, "metrics": {"accuracy": 0.5}}), {}, None)
    assert "history" not in status
    # A named metric the report lacks writes nothing either.
    assert "history" not in progress_status(parse({"epoch": 1, "metrics": {"loss": 1}}), {}, None, ["accuracy"])


def test_reports_merged_between_two_status_writes_keep_every_epoch() -> None:
    """The operator writes progress at most every few seconds; epochs reported in between are not lost."""
    pending = parse({"epoch": 1, "metrics": {"accuracy": 0.5}})
    for epoch in (2, 3):
        pending = merge_reports(pending, parse({"epoch": epoch, "metrics": {"accuracy": epoch / 10}}))
    pending = merge_reports(pending, parse({"checkpoint": {"path": "/c/3"}}))  # no epoch: no point of its own
    status = progress_status(pending, {}, None, ["accuracy"])
    assert [point["epoch"] for point in status["history"]["accuracy"]] == [1, 2, 3]
    assert status["history"]["accuracy"][-1]["value"] == 0.3


def test_a_long_run_is_thinned_to_the_bound_and_keeps_its_first_and_newest_epochs() -> None:
    series = [{"epoch": epoch, "value": float(epoch)} for epoch in range(1, 1001)]
    kept = thinned(series)
    epochs = [point["epoch"] for point in kept]
    assert len(kept) <= HISTORY_POINTS
    assert epochs[0] == 1 and epochs[-1] == 1000 and epochs == sorted(epochs)


def test_recording_point_by_point_stays_bounded() -> None:
    history = None
    for epoch in range(1, 3 * HISTORY_POINTS):
        history = recorded(history, [(epoch, {"loss": 1.0 / epoch})], ["loss"])
    assert history is not None and len(history["loss"]) <= HISTORY_POINTS
    assert history["loss"][0]["epoch"] == 1 and history["loss"][-1]["epoch"] == 3 * HISTORY_POINTS - 1


def test_names_no_longer_asked_for_are_dropped_from_the_history() -> None:
    previous = {"loss": [{"epoch": 1, "value": 1.0}], "accuracy": [{"epoch": 1, "value": 0.1}]}
    assert recorded(previous, [(2, {"accuracy": 0.2})], ["accuracy"]) == {
        "accuracy": [{"epoch": 1, "value": 0.1}, {"epoch": 2, "value": 0.2}]
    }


def test_the_planner_reads_the_names_from_the_jobs_annotation() -> None:
    body = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "j", "namespace": "ns", "annotations": {c.ANNOTATION_METRIC_HISTORY: "accuracy"}},
        "spec": {"framework": "xgboost", "image": "i", "command": ["c"]},
    }
    assert history_names(TrainingJob.from_body(body).annotations) == ("accuracy",)


def test_the_planner_records_the_history_of_the_metrics_the_job_names() -> None:
    """The planner folds a report through progress/fold.py, which reads the names from the job it is given."""
    from trainingjob.config import OperatorConfig
    from trainingjob.reconcile.inputs import PlanInputs
    from trainingjob.reconcile.observed import ObservedChildren
    from trainingjob.reconcile.planner import plan

    body = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "j", "namespace": "ns", "annotations": {c.ANNOTATION_METRIC_HISTORY: "accuracy"}},
        "spec": {"framework": "xgboost", "image": "i", "command": ["c"]},
        "status": {"phase": "Succeeded", "completionTime": "2026-11-22T12:00:00Z"},
    }
    report = Report(epoch=3, total_epochs=3, metrics={"accuracy": 0.9, "loss": 0.1}, received="2026-11-22T12:00:00Z")
    result = plan(TrainingJob.from_body(body), ObservedChildren(), NOW, OperatorConfig(), PlanInputs(report))
    assert result.status.to_dict()["progress"]["history"] == {"accuracy": [{"epoch": 3, "value": 0.9}]}
