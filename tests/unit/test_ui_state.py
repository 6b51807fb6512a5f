"""The UI's pure parts: progress history (in memory and on disk), the job list's rows, the store's diff after a
re-list, manifest parsing and the API errors passed on verbatim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.cli.ui import allowed_hosts
from trainingjob.ui.history import History, point_from_job
from trainingjob.ui.kubeapi import InputError, error_payload, parse_manifest
from trainingjob.ui.store import JobStore, summary


def job(name: str = "a", uid: str = "uid-a", **progress: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running"}
    if progress:
        status["progress"] = {"lastUpdateTime": "2026-01-01T00:00:00Z", **progress}
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"framework": "pytorch", "workers": 2},
        "status": status,
    }


def test_history_records_each_new_measurement_once(tmp_path: Path) -> None:
    history = History(tmp_path)
    assert history.record(job()) is None  # nothing reported yet
    first = history.record(job(epoch=1, totalEpochs=4, percent=25.0, metrics={"loss": 1.5}))
    assert first == {
        "epoch": 1, "totalEpochs": 4, "percent": 25.0, "metrics": {"loss": 1.5}, "time": "2026-01-01T00:00:00Z"
    }  # fmt: skip
    assert history.record(job(epoch=1, totalEpochs=4, percent=25.0, metrics={"loss": 1.5})) is None
    history.record(job(epoch=2, totalEpochs=4, percent=50.0, metrics={"loss": 0.9}))
    assert [p["epoch"] for p in history.points("uid-a")] == [1, 2]


def test_history_survives_a_restart_and_forgets_deleted_jobs(tmp_path: Path) -> None:
    History(tmp_path).record(job(epoch=1, metrics={"loss": 2.0}))
    History(tmp_path).record(job(epoch=2, metrics={"loss": 1.0}))
    restarted = History(tmp_path)
    assert [p["metrics"]["loss"] for p in restarted.points("uid-a")] == [2.0, 1.0]
    restarted.prune({"another-uid"})
    assert restarted.points("uid-a") == [] and not list(tmp_path.iterdir())


def test_history_is_bounded_in_memory_and_on_disk(tmp_path: Path) -> None:
    history = History(tmp_path, max_points=3)
    for epoch in range(10):
        history.record(job(epoch=epoch))
    assert [p["epoch"] for p in history.points("uid-a")] == [7, 8, 9]
    lines = (tmp_path / "uid-a.jsonl").read_text().splitlines()
    assert len(lines) <= 6 and json.loads(lines[-1])["epoch"] == 9


def test_history_ignores_a_uid_that_is_no_file_name(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.record(job(uid="../../etc/passwd", epoch=1))
    assert not list(tmp_path.iterdir())


def test_point_keeps_the_checkpoint_seen_with_it() -> None:
    body = job(epoch=3)
    body["status"]["lastCheckpoint"] = {"path": "/ckpt/3", "epoch": 3}
    assert point_from_job(body)["checkpoint"] == {"path": "/ckpt/3", "epoch": 3}


def test_summary_shows_progress_eta_and_running_workers() -> None:
    body = job(epoch=2, totalEpochs=4, percent=50.0, estimatedRemainingSeconds=90, metrics={"loss": 0.5})
    body["status"]["workerStatuses"] = [{"phase": "Running"}, {"phase": "Pending"}]
    row = summary(body)
    assert (row["phase"], row["percent"], row["etaSeconds"], row["running"], row["workers"]) == (
        "Running", 50.0, 90, 1, 2
    )  # fmt: skip
    assert summary({"metadata": {"name": "x"}})["phase"] == "Pending"


def test_store_relist_deletes_what_vanished_during_a_watch_gap() -> None:
    store = JobStore(History(None))
    store.replace_all([job("a", "1"), job("b", "2")], None)
    with store.subscribe() as subscriber:
        store.replace_all([job("b", "2")], None)
        events = [subscriber.queue.get_nowait() for _ in range(subscriber.queue.qsize())]
    assert ("delete", {"namespace": "ns", "name": "a"}) in events
    assert [row["name"] for row in store.snapshot()] == ["b"]


def test_a_subscriber_that_falls_behind_is_told_to_resync() -> None:
    store = JobStore(History(None))
    with store.subscribe() as subscriber:
        for index in range(subscriber.queue.maxsize + 5):
            store.upsert(job("a", str(index)))
        assert subscriber.dropped
        items = [subscriber.queue.get_nowait() for _ in range(subscriber.queue.qsize())]
    assert items[-1] == ("resync", None)


def test_parse_manifest_takes_one_trainingjob_and_fills_the_namespace() -> None:
    namespace, manifest = parse_manifest(
        "apiVersion: ml.example.com/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\n", "dev"
    )
    assert namespace == "dev" and manifest["metadata"] == {"name": "x", "namespace": "dev"}
    for text, reason in [
        ("a: [", "not valid YAML"),
        ("kind: Pod\napiVersion: v1\n", "expected kind TrainingJob"),
        ("kind: TrainingJob\n---\nkind: TrainingJob\n", "found 2 document"),
    ]:
        with pytest.raises(InputError, match=reason):
            parse_manifest(text, "dev")


def test_error_payload_passes_the_api_servers_status_on_verbatim() -> None:
    error = ApiException(status=403, reason="Forbidden")
    message = 'trainingjobs.ml.example.com "x" is forbidden: User "bob" cannot delete resource "trainingjobs"'
    error.body = json.dumps({"kind": "Status", "reason": "Forbidden", "message": message, "code": 403})
    assert error_payload(error) == (403, {"status": 403, "reason": "Forbidden", "message": message})
    raw = ApiException(status=500, reason="Internal Server Error")
    raw.body = b"Get https://node/containerLogs: connection refused"
    assert error_payload(raw)[1]["message"] == "Get https://node/containerLogs: connection refused"


def test_allowed_hosts_are_the_listening_address_and_its_loopback_names() -> None:
    assert allowed_hosts("127.0.0.1", 8099, ()) == {"127.0.0.1:8099", "localhost:8099", "[::1]:8099"}
    assert allowed_hosts("10.1.2.3", 80, ("ui.example:443",)) == {"10.1.2.3:80", "ui.example:443"}
