"""JSON log records carry the fields our log schema names: level (besides severity), namespace, job, reconcile."""

from __future__ import annotations

import logging

from trainingjob.operator.logs import ReconcileContextFilter, reconcile_context


def record(level: int) -> logging.LogRecord:
    return logging.LogRecord("trainingjob.test", level, __file__, 1, "hello", None, None)


def test_every_record_gets_a_level_and_records_inside_a_reconcile_name_the_job() -> None:
    outside = record(logging.WARNING)
    assert ReconcileContextFilter().filter(outside)
    assert outside.level == "warning" and not hasattr(outside, "job")
    with reconcile_context("ml", "resnet") as reconcile_id:
        inside = record(logging.INFO)
        ReconcileContextFilter().filter(inside)
    assert (inside.level, inside.namespace, inside.job, inside.reconcile) == ("info", "ml", "resnet", reconcile_id)
