"""An MPI job whose launcher fails says which rank ended it: mpirun's last words (the launcher's log tail, its
termination message through FallbackToLogsOnError) are read for the rank, and only the rank, a number or two and a
host name reach the job's message (the log is the user's).

The texts are Open MPI 4.1's own (help-mpi-api.txt, help-orterun.txt, help-errmgr-base.txt as mpirun prints them).
"""

from __future__ import annotations

from tests.unit.test_planner import stored
from tests.unit.test_planner_roles import CONFIG, MPI, NOW, STARTED, gang, make_job, observe, pod
from trainingjob.builders.pod import desired_worker_pod
from trainingjob.frameworks.mpi import rank_failure
from trainingjob.reconcile.planner import plan

ABORT = """Traceback (most recent call last):
  File "/app/train_mpi.py", line 171, in <module>
RuntimeError: boom
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode 1.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
"""
SIGNAL = """--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 0 on node job-worker-2 exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""
NON_ZERO = """--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[47710,1],1]
  Exit code:    3
--------------------------------------------------------------------------
"""
NO_FINALIZE = """--------------------------------------------------------------------------
mpirun has exited due to process rank 1 with PID 0 on
node job-worker-1 exiting improperly. There are three reasons this could occur:
"""
LOST = """--------------------------------------------------------------------------
ORTE has lost communication with a remote daemon.

  HNP daemon   : [[47710,0],0] on node job-launcher-0
  Remote daemon: [[47710,0],2] on node job-worker-1

This is usually due to either a failure of the TCP network
"""


# What the SDK prints before its MPI_Abort (sdk/_mpi_abort.py), and what mpirun then printed in 2 runs of 3 instead
# of the abort's help text.
SDK_ABORT = """RuntimeError: rank 0 failed at epoch 3
trainingjob.sdk: rank 0 failed (RuntimeError); aborting the MPI job (MPI_Abort) so the other ranks do not wait for \
it forever
[vm:32267] [[4853,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file \
../../../orte/util/show_help.c at line 501
"""


def test_each_way_mpirun_reports_a_rank_ending_the_job_is_named() -> None:
    assert rank_failure(ABORT) == "MPI rank 0 called MPI_Abort (errorcode 1)"
    assert rank_failure(SDK_ABORT) == "MPI rank 0 failed (RuntimeError) and aborted the MPI job"
    assert rank_failure(SDK_ABORT + ABORT) == "MPI rank 0 failed (RuntimeError) and aborted the MPI job"
    assert rank_failure(SIGNAL) == "MPI rank 2 on job-worker-2 was killed by signal 9"
    assert rank_failure(NON_ZERO) == "MPI rank 1 exited with code 3"
    assert rank_failure(NO_FINALIZE) == "MPI rank 1 on job-worker-1 exited without MPI_Finalize"
    assert rank_failure(LOST) == "mpirun lost its daemon on job-worker-1"


def test_the_rank_that_aborted_is_named_before_the_ranks_mpirun_killed_after_it() -> None:
    assert rank_failure(ABORT + SIGNAL) == "MPI rank 0 called MPI_Abort (errorcode 1)"


def test_nothing_is_made_up_and_nothing_but_numbers_and_a_host_name_is_taken_from_the_log() -> None:
    assert rank_failure(None) is None
    assert rank_failure("mpirun: command not found\n") is None
    hostile = SIGNAL.replace("job-worker-2", "<script>alert(1)</script>")
    assert rank_failure(hostile) is None


def test_a_failed_launcher_restarts_the_job_with_a_message_naming_the_rank_and_then_fails_it() -> None:
    job = make_job({"phase": "Running", **STARTED}, backoffLimit=1, **MPI)
    pods = [p for p in gang(job) if p.role != "launcher"]
    launcher = pod(job, "launcher", 0, "Failed", exit_code=1, reason="Error", message=ABORT)
    result = plan(job, observe(job, [launcher, *pods]), NOW, CONFIG)
    status = stored(result)
    assert status["phase"] == "Restarting"
    assert status["message"].startswith(
        "launcher 0 (pod job-launcher-0) failed with exit code 1 (Error): MPI rank 0 called MPI_Abort (errorcode 1)"
    ), status["message"]
    warnings = [e.message for e in result.events if e.reason == "WorkerFailed"]
    assert warnings == [
        "launcher 0 (pod job-launcher-0) failed with exit code 1 (Error): MPI rank 0 called MPI_Abort (errorcode 1)"
    ]

    spent = make_job({"phase": "Running", **STARTED, "restartCount": 1}, backoffLimit=1, **MPI)
    result = plan(spent, observe(spent, [launcher, *pods]), NOW, CONFIG)
    status = stored(result)
    assert status["phase"] == "Failed"
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Failed"] == ["BackoffLimitExceeded"]
    assert "MPI rank 0 called MPI_Abort (errorcode 1); backoffLimit 1 reached" in status["message"]


def test_only_the_launcher_turns_its_log_tail_into_its_termination_message() -> None:
    job = make_job(**MPI)
    launcher = desired_worker_pod(job, 0, 0, CONFIG, role="launcher")["spec"]["containers"][0]
    worker = desired_worker_pod(job, 0, 0, CONFIG)["spec"]["containers"][0]
    assert launcher["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert "terminationMessagePolicy" not in worker
