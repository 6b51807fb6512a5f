"""A waiting job's place in Kueue's queues, as `tj` and the UI show it (read from the visibility API's answer)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from trainingjob.cli import queue_view
from trainingjob.queueing.visibility import (
    place_of,
    position_text,
    short_position,
    waited_seconds,
    waiting,
)

NOW = datetime(2026, 11, 29, 6, 0, 0, tzinfo=UTC)


def job(name: str, **queue: Any) -> dict[str, Any]:
    base = {"name": "team-a", "workload": f"trainingjob-{name}-1234", "admitted": False}
    return {"metadata": {"namespace": "ns", "name": name}, "status": {"phase": "Queued", "queue": {**base, **queue}}}


def pending(*names: str) -> list[dict[str, Any]]:
    """Kueue's answer: positions count from 0, in the ClusterQueue (shared) and in the LocalQueue."""
    return [
        {"metadata": {"name": f"trainingjob-{n}-1234"}, "positionInClusterQueue": i + 3, "positionInLocalQueue": i}
        for i, n in enumerate(names)
    ]


def test_the_place_counts_from_one_and_names_both_queues() -> None:
    place = place_of(job("b"), NOW, pending("a", "b"), cluster_queue="gpus")
    assert (place.in_cluster_queue, place.in_local_queue) == (5, 2)
    assert position_text(place) == "5 in ClusterQueue gpus, 2 in LocalQueue team-a"
    assert short_position(place) == "5"


def test_time_waited_adds_the_current_wait_to_the_finished_ones() -> None:
    queue = {"queuedSeconds": 100, "queuedSince": "2026-11-29T05:59:00Z"}
    assert waited_seconds(queue, NOW) == 160
    assert waited_seconds({"queuedSeconds": 7}, NOW) == 7
    assert waited_seconds({}, NOW) is None


def test_an_unreadable_or_missing_position_says_why_and_an_admitted_job_has_none() -> None:
    refused = place_of(job("b"), NOW, None, unknown="HTTP 403: forbidden")
    assert short_position(refused) == "?" and position_text(refused) == "unknown: HTTP 403: forbidden"
    absent = place_of(job("c"), NOW, pending("a", "b"))
    assert "not in Kueue's pending list" in position_text(absent)
    far = place_of(job("z"), NOW, pending("a"), complete=False)
    assert short_position(far) == ">1"
    admitted = job("a", admitted=True, clusterQueue="gpus")
    assert not waiting(admitted) and position_text(place_of(admitted, NOW, pending("a"))) == ""
    finished = {**job("f"), "status": {"phase": "Failed", "queue": job("f")["status"]["queue"]}}
    assert not waiting(finished)


def test_the_table_gets_queue_columns_only_when_a_job_goes_through_kueue() -> None:
    plain = {"metadata": {"namespace": "ns", "name": "p"}, "status": {"phase": "Running"}}
    assert not queue_view.queued_listing([plain])
    assert queue_view.queued_listing([plain, job("b")])
    assert queue_view.before_age(["NAME", "AGE"], queue_view.QUEUE_HEADERS) == [
        "NAME",
        "QUEUE",
        "POSITION",
        "QUEUED",
        "AGE",
    ]
    waiting_job = job("b", queuedSeconds=0, queuedSince="2026-11-29T05:55:00Z")
    place = place_of(waiting_job, NOW, pending("a", "b"), "gpus")
    assert queue_view.queue_cells(waiting_job, place, NOW) == ["team-a", "5", "5m"]
    assert queue_view.queue_cells(plain, None, NOW) == ["<none>", "-", "-"]
    rows = dict(queue_view.describe_rows(waiting_job, place, NOW))
    assert rows["Queue"] == "LocalQueue team-a of ClusterQueue gpus"
    assert rows["Position"] == "5 in ClusterQueue gpus, 2 in LocalQueue team-a"
    assert rows["Queued for"].startswith("5m in all")


def test_describe_says_how_many_workers_kueue_admitted_when_fewer_than_asked() -> None:
    partial = job("e")
    partial["spec"] = {"workers": 4}
    partial["status"]["queue"].update(admitted=True, reason="Admitted", admittedWorkers=3)
    rows = dict(queue_view.describe_rows(partial, None, NOW))
    assert rows["Admitted"] == "3 of 4 workers (Kueue's partial admission)"
    assert "Admitted" not in dict(queue_view.describe_rows(job("f"), None, NOW))
