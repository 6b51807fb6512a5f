"""The typed status (api/status.py) reads every field the schema has and writes back exactly what it read."""

from __future__ import annotations

import datetime

from trainingjob.api import constants as k
from trainingjob.api.schema_status import status_schema
from trainingjob.api.status import AS_STORED, LISTS, TIMES, Counters, GangRecord, JobStatus, Phase, job_phase, phase_of

WRITTEN = {
    "phase": "Running",
    "message": "2/2 workers running",
    "conditions": [{"type": "Running", "status": "True", "reason": "AllWorkersRunning", "message": "m"}],
    "startTime": "2026-11-22T11:00:00Z",
    "completionTime": "2026-11-22T12:00:00Z",
    "workerStatuses": [{"workerId": 0, "podName": "j-worker-0", "phase": "Running"}],
    "roleStatuses": {"worker": {"replicas": 2, "running": 2}},
    "selector": "ml.example.com/job-name=j",
    "observedGeneration": 3,
    "workers": 2,
    "restartCount": 1,
    "disruptionCount": 2,
    "attempt": 3,
    "attemptStartTime": "2026-11-22T11:30:00Z",
    "nextRestartTime": "2026-11-22T11:31:00Z",
    "workerSpec": {"generation": 3, "podSpecHash": "abc", "specHash": "def"},
    "lastFailure": {"workerId": 1, "podName": "j-worker-1", "time": "2026-11-22T11:29:00Z", "exitCode": 1},
    "replacedPods": ["uid-1"],
    "suspendTime": "2026-11-22T11:10:00Z",
    "suspendedSeconds": 60,
    "lastCheckpoint": {"epoch": 2, "path": "/c/2", "time": "2026-11-22T11:40:00Z"},
    "runtime": {
        "kind": "ClusterTrainingRuntime",
        "name": "torch",
        "generation": 2,
        "framework": "pytorch",
        "template": {},
    },
    "lastStop": {"reason": "Suspended", "time": "2026-11-22T11:10:00Z", "checkpointed": False},
    "progress": {"percent": 50.0, "epoch": 2},
    "simulated": True,
    "gang": {"name": "j-gang-3", "state": "Scheduled", "reason": "GangScheduled", "message": "2 placed", "placed": 2},
    "tracking": {"trackingUri": "http://m", "runName": "j"},
    "resources": {"allocatedGPUs": 4, "allocatedNodes": 2, "gpuUtilization": 80.0},
    "queue": {"name": "team-a", "workload": "trainingjob-j-1a2b3", "admitted": True, "queuedSeconds": 12},
}


def test_every_status_field_of_the_schema_is_a_typed_field() -> None:
    """A field the schema gains and the typed status does not know would be dropped by the operator's writes."""
    known = {"phase", "workerSpec", "gang", "attempt", "restartCount", "disruptionCount"}
    known |= set(AS_STORED.values()) | set(TIMES.values()) | set(LISTS.values())
    assert set(status_schema()["properties"]) == known
    assert set(WRITTEN) == known


def test_a_written_status_reads_typed_and_writes_back_unchanged() -> None:
    status = JobStatus.from_dict(WRITTEN)
    assert status.phase is Phase.RUNNING and not status.finished
    assert status.counters == Counters(attempt=3, restart_count=1, disruption_count=2)
    assert status.start_time == datetime.datetime(2026, 11, 22, 11, 0, tzinfo=datetime.UTC)
    assert status.gang == GangRecord("Scheduled", "GangScheduled", "2 placed", name="j-gang-3", placed=2)
    assert status.to_dict() == WRITTEN
    assert JobStatus.from_dict({}).to_dict() == {}


def test_times_are_kept_as_they_are_written_so_a_plan_compares_equal_to_what_is_read_back() -> None:
    now = datetime.datetime(2026, 11, 22, 12, 0, 0, 750_000, tzinfo=datetime.UTC)
    planned = JobStatus(phase=Phase.RUNNING, start_time=now)
    assert JobStatus.from_dict(planned.to_dict()) == planned
    assert planned.to_dict()["startTime"] == "2026-11-22T12:00:00Z"


def test_the_phase_enum_is_the_schema_enum() -> None:
    assert tuple(phase.value for phase in Phase) == k.PHASES
    assert [phase for phase in Phase if phase.finished] == [Phase.SUCCEEDED, Phase.FAILED]
    assert phase_of("Succeeded") is Phase.SUCCEEDED and phase_of("Completed") is None and phase_of(None) is None


def test_job_phase_reads_a_bodys_phase_and_none_before_the_operator_writes_one() -> None:
    """`tj`, the client, the queue view and the sweep planner judge a job's phase through job_phase: every phase the
    schema lets the API server store comes back as its Phase, and a job without one as None."""
    assert [job_phase({"status": {"phase": value}}) for value in k.PHASES] == list(Phase)
    assert job_phase({}) is None
    assert job_phase({"status": None}) is None
    assert job_phase({"status": {"restartCount": 0}}) is None
