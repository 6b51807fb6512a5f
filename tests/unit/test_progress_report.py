"""Progress reports: parsing and limits, the status they become, and who may send them (pure, no server)."""

from __future__ import annotations

import datetime
import json

import pytest
from kubernetes_asyncio import client

from trainingjob.progress.auth import Caller, authorize, caller_from_review
from trainingjob.progress.report import ReportError, parse_report, progress_status
from trainingjob.reconcile.observed import PodView

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def parse(body: object) -> object:
    return parse_report(json.dumps(body).encode(), NOW)


def test_a_full_report_is_parsed() -> None:
    report = parse(
        {
            "worker": 0,
            "epoch": 2,
            "totalEpochs": 4,
            "step": 10,
            "totalSteps": 40,
            "metrics": {"loss": 0.5, "acc": 1},
            "checkpoint": {"epoch": 2, "path": "/c/2"},
        }
    )
    assert (report.epoch, report.total_steps, report.metrics, report.checkpoint) == (
        2,
        40,
        {"loss": 0.5, "acc": 1},
        {"path": "/c/2", "epoch": 2},
    )


@pytest.mark.parametrize(
    ("raw", "status", "reason"),
    [
        (b"{nope", 400, "not valid JSON"),
        (b"[" * 8000 + b"]" * 8000, 400, "nests deeper than"),
        (b'{"epoch": 1, "x": ' + b"[" * 9 + b"]" * 9 + b"}", 400, "nests deeper than 8"),
        (b"\xff\xfe", 400, "not valid JSON"),
        (b"[1, 2]", 400, "JSON object"),
        (json.dumps({"epoch": -1}).encode(), 400, "non-negative"),
        (json.dumps({"epoch": 1.5}).encode(), 400, "non-negative integer"),
        (json.dumps({"epoch": 10**30}).encode(), 400, "at most 9223372036854775807"),
        (json.dumps({"checkpoint": {"path": "/c", "step": 2**63}}).encode(), 400, "at most"),
        (json.dumps({"metrics": {"loss": 10**400}}).encode(), 400, "finite number"),
        (json.dumps({"epoch": 3, "totalEpochs": 2}).encode(), 400, "must not exceed"),
        (json.dumps({"metrics": {"loss": "low"}}).encode(), 400, "finite number"),
        (json.dumps({"metrics": {"bad name": 1}}).encode(), 400, "invalid"),
        (json.dumps({"metrics": {f"m{i}": i for i in range(33)}}).encode(), 400, "at most 32"),
        (json.dumps({"worker": 0}).encode(), 400, "carries nothing"),
        (json.dumps({"checkpoint": {"path": "/c\x1b]52;c;cm0gLXJmIH4=\x1b\\"}}).encode(), 400, "control"),
        (json.dumps({"checkpoint": {"path": "/c/\u202egpj.exe"}}).encode(), 400, "control"),
        (json.dumps({"checkpoint": {"path": "/c/\u0085x"}}).encode(), 400, "control"),
        (json.dumps({"checkpoint": {"path": "/" + "c" * 1024}}).encode(), 400, "longer than 1024"),
        (b" " * (16 * 1024 + 1), 413, "larger than"),
    ],
)
def test_bad_reports_are_refused_with_a_reason(raw: bytes, status: int, reason: str) -> None:
    with pytest.raises(ReportError) as refused:
        parse_report(raw, NOW)
    assert refused.value.status == status and reason in refused.value.reason


def test_progress_status_prefers_steps_and_keeps_earlier_metrics() -> None:
    report = parse({"epoch": 1, "totalEpochs": 4, "step": 30, "totalSteps": 40, "metrics": {"loss": 0.1}})
    started = (NOW - datetime.timedelta(seconds=300)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = progress_status(report, {"metrics": {"accuracy": 0.5}}, started)
    assert status["percent"] == 75.0
    assert status["metrics"] == {"accuracy": 0.5, "loss": 0.1}
    assert "estimatedRemainingSeconds" not in status  # one point: the pace is unknown, not 300 s for 75 %


def review(
    authenticated: bool = True,
    audiences: tuple[str, ...] = ("trainingjob-progress",),
    username: str = "system:serviceaccount:ml:default",
    pod: str | None = "job-worker-0",
) -> object:
    extra = {"authentication.kubernetes.io/pod-name": [pod], "authentication.kubernetes.io/pod-uid": ["u0"]}
    return client.V1TokenReviewStatus(
        authenticated=authenticated,
        audiences=list(audiences),
        user=client.V1UserInfo(username=username, extra=extra if pod else {}),
    )


@pytest.mark.parametrize(
    "status",
    [
        review(authenticated=False),
        review(audiences=("https://kubernetes.default.svc",)),
        review(username="alice"),
        review(pod=None),
        None,
    ],
)
def test_only_pod_bound_service_account_tokens_for_our_audience_authenticate(status: object) -> None:
    with pytest.raises(ReportError) as refused:
        caller_from_review(status)
    assert refused.value.status == 401


JOB_UID = "job-uid"


def workers(controller_uid: str = JOB_UID) -> list[PodView]:
    return [
        PodView(
            name=f"job-worker-{i}",
            index=i,
            attempt=0,
            spec_hash="h",
            phase="Running",
            uid=f"u{i}",
            controller_uid=controller_uid,
        )
        for i in range(2)
    ]


def test_the_chief_of_the_job_may_report() -> None:
    caller = caller_from_review(review())
    assert authorize(caller, "ml", JOB_UID, workers(), (0,)).index == 0


@pytest.mark.parametrize(
    ("caller", "namespace", "reporters"),
    [
        (Caller("other", "job-worker-0", "u0"), "ml", (0,)),  # another namespace
        (Caller("ml", "elsewhere-worker-0", "x"), "ml", (0,)),  # a pod of another job
        (Caller("ml", "job-worker-0", "stale-uid"), "ml", (0,)),  # a former pod of the same name
        (Caller("ml", "job-worker-1", "u1"), "ml", (0,)),  # a worker that may not report
    ],
)
def test_everyone_else_is_forbidden(caller: Caller, namespace: str, reporters: tuple[int, ...]) -> None:
    with pytest.raises(ReportError) as refused:
        authorize(caller, namespace, JOB_UID, workers(), reporters)
    assert refused.value.status == 403


@pytest.mark.parametrize("controller_uid", ["", "another-owner-uid"])
def test_a_pod_with_the_jobs_labels_but_not_controlled_by_the_job_is_forbidden(controller_uid: str) -> None:
    with pytest.raises(ReportError) as refused:
        authorize(caller_from_review(review()), "ml", JOB_UID, workers(controller_uid), (0,))
    assert refused.value.status == 403
    assert "not controlled by this job" in refused.value.reason


def test_the_controller_uid_is_read_from_the_controller_owner_reference() -> None:
    from trainingjob.reconcile.observed import pod_view

    owners = [
        {"kind": "ConfigMap", "uid": "not-a-controller"},
        {"kind": "TrainingJob", "uid": JOB_UID, "controller": True},
    ]
    assert pod_view({"metadata": {"name": "p", "ownerReferences": owners}}).controller_uid == JOB_UID
    assert pod_view({"metadata": {"name": "p", "ownerReferences": owners[:1]}}).controller_uid == ""


def test_pending_reports_merge_so_a_checkpoint_report_does_not_hide_the_epoch() -> None:
    from trainingjob.progress.report import merge_reports

    merged = merge_reports(
        parse({"epoch": 2, "totalEpochs": 6, "metrics": {"loss": 0.7}}),
        parse({"checkpoint": {"epoch": 2, "path": "/c/2"}, "metrics": {"acc": 0.6}}),
    )
    assert (merged.epoch, merged.total_epochs, merged.checkpoint["path"]) == (2, 6, "/c/2")
    assert merged.metrics == {"loss": 0.7, "acc": 0.6}


def test_merged_reports_keep_the_newest_metric_names_within_the_schema() -> None:
    from trainingjob.progress.report import MAX_METRICS, merge_reports

    first = parse({"epoch": 1, "metrics": {f"a{i}": i for i in range(MAX_METRICS)}})
    second = parse({"epoch": 2, "metrics": {f"b{i}": i for i in range(MAX_METRICS - 2)}})
    merged = merge_reports(first, second)
    assert len(merged.metrics) == MAX_METRICS
    assert set(second.metrics) < set(merged.metrics) and {"a31", "a30"} < set(merged.metrics), "the latest of both"
    status = progress_status(parse({"epoch": 3, "metrics": {"loss": 1.0}}), {"metrics": merged.metrics}, None)
    assert len(status["metrics"]) == MAX_METRICS and status["metrics"]["loss"] == 1.0


def test_percent_stays_within_100_when_a_newer_step_meets_an_older_total() -> None:
    from trainingjob.progress.report import merge_reports

    merged = merge_reports(parse({"step": 5, "totalSteps": 10}), parse({"step": 50}))
    assert progress_status(merged, {}, None)["percent"] == 100.0


def at(seconds: float) -> str:
    return (NOW + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_at(seconds: float, step: int) -> object:
    return parse_report(
        json.dumps({"step": step, "totalSteps": 100}).encode(), NOW + datetime.timedelta(seconds=seconds)
    )


def paced(points: list[tuple[float, int]], since: float, previous: dict | None = None) -> dict:
    """progress after reports of (seconds after NOW, step of 100) in that order, all in an attempt from `since`."""
    status = previous or {}
    for seconds, step in points:
        status = progress_status(report_at(seconds, step), status, at(since))
    return status


def test_eta_is_unknown_until_three_points_then_follows_the_recent_pace() -> None:
    status = paced([(100, 20)], since=0)
    assert "estimatedRemainingSeconds" not in status, "the time before the first report is not training"
    status = paced([(110, 22)], 0, status)
    assert "estimatedRemainingSeconds" not in status
    status = paced([(120, 24)], 0, status)
    assert status["estimatedRemainingSeconds"] == 380  # 2 % per 10 s, 76 % to go
    status = paced([(125, 24), (130, 26)], 0, status)  # a report without progress adds no point
    assert [p["percent"] for p in status["recent"]] == [20.0, 22.0, 24.0, 26.0]


def test_a_blocked_start_does_not_count_against_the_pace() -> None:
    """Workers created at 0 s waited 30 s (unschedulable, an image pull) before training at 2 % per 5 s."""
    status = paced([(35, 2), (40, 4), (45, 6)], since=0)
    assert status["estimatedRemainingSeconds"] == 235  # not (100 - 6) * 45 / 6 = 705


def test_a_new_attempt_starts_its_pace_anew_and_only_recent_points_count() -> None:
    """Attempt 0 ran at 1 % per 10 s; after a scale (attempt 1, from 1000 s) it resumes at 50 % and runs at 1 %
    per 2 s: its ETA is unknown until it has three points of its own, then at the new pace."""
    first = paced([(10 * step, step) for step in range(1, 40)], since=0)
    assert first["estimatedRemainingSeconds"] == 610 and len(first["recent"]) == 6
    resumed = paced([(1060, 50), (1062, 51)], since=1000, previous=first)
    assert "estimatedRemainingSeconds" not in resumed, "no pace of this attempt yet"
    later = paced([(1064, 52)], since=1000, previous=resumed)
    assert later["percent"] == 52.0 and later["estimatedRemainingSeconds"] == 96


def test_going_back_starts_the_points_over_and_100_percent_is_done() -> None:
    status = paced([(10, 10), (20, 20), (30, 30), (40, 5)], since=0)  # restored an older checkpoint
    assert status["recent"] == [{"percent": 5.0, "time": at(40)}] and "estimatedRemainingSeconds" not in status
    assert paced([(50, 100)], 0, status)["estimatedRemainingSeconds"] == 0
