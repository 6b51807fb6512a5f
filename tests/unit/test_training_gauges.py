"""Seed 002's per-job training gauges (operator/metrics.py training_gauges), pure: the guide's names and labels, one
series per job that reported the value, nothing for what a worker sent that is not a finite number, and nothing
left of a job once it is gone from the cache."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from trainingjob.operator.metrics import CacheCollector, training_gauges


def job(name: str, progress: dict[str, Any] | None, namespace: str = "ml") -> dict[str, Any]:
    status = {"phase": "Running", **({"progress": progress} if progress is not None else {})}
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {}, "status": status}


def samples(jobs: list[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    return {
        (family.name, s.labels["namespace"], s.labels["trainingjob"]): s.value
        for family in training_gauges(jobs)
        for s in family.samples
    }


def test_the_guides_gauges_carry_the_reported_progress_under_its_names_and_labels() -> None:
    reported = {"percent": 45.0, "epoch": 9, "totalEpochs": 20, "metrics": {"loss": 0.234, "accuracy": 0.876}}
    assert samples([job("resnet", reported)]) == {
        ("trainingjob_progress_percent", "ml", "resnet"): 45.0,
        ("trainingjob_current_epoch", "ml", "resnet"): 9.0,
        ("trainingjob_loss", "ml", "resnet"): 0.234,
        ("trainingjob_accuracy", "ml", "resnet"): 0.876,
    }


def test_a_job_has_a_series_only_for_what_it_reported() -> None:
    jobs = [job("quiet", None), job("loss-only", {"metrics": {"loss": 1.5}}), job("epoch", {"epoch": 0})]
    assert samples(jobs) == {
        ("trainingjob_loss", "ml", "loss-only"): 1.5,
        ("trainingjob_current_epoch", "ml", "epoch"): 0.0,
    }


@pytest.mark.parametrize("bad", ["0.5", True, None, {"value": 1}, [1], float("nan"), float("inf")])
def test_what_is_not_a_finite_number_is_left_out(bad: Any) -> None:
    assert samples([job("x", {"percent": bad, "epoch": bad, "metrics": {"loss": bad, "accuracy": bad}})]) == {}
    assert samples([job("y", {"metrics": bad})]) == {}


def test_the_series_are_bounded_by_the_jobs_and_go_with_them() -> None:
    cache = [job(f"j{i}", {"epoch": i, "metrics": {"loss": 1.0, "accuracy": 0.5, "f1": 0.3}}) for i in range(3)]
    registry = CollectorRegistry()
    registry.register(CacheCollector(lambda: list(cache), lambda: [], lambda: True))
    text = generate_latest(registry).decode()
    assert text.count("trainingjob_current_epoch{") == 3 and "f1" not in text
    cache.pop(1)  # the job is deleted: the informer drops it from the cache
    text = generate_latest(registry).decode()
    assert 'trainingjob_loss{namespace="ml",trainingjob="j1"}' not in text
    assert text.count("trainingjob_loss{") == 2
