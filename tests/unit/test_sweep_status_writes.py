"""When the sweep controller writes a sweep's status: state changes at once; a change that only carries running
trials' latest value and epochs waits for PROGRESS_WRITE_SECONDS after the last write (pure parts)."""

from __future__ import annotations

import copy

from tests.sweep_support import NOW, finished, sweep, views, with_status
from trainingjob.operator.trainingsweep.memory import SweepMemory
from trainingjob.operator.trainingsweep.reconciler import PROGRESS_WRITE_SECONDS, SweepReconciler
from trainingjob.sweeps import study
from trainingjob.sweeps.planner import ObservedSweep, plan_sweep
from trainingjob.sweeps.status import progress_only


def plan(sweep_object, trials):
    return plan_sweep(sweep_object, ObservedSweep(trials=views(trials)), study, NOW)


def running_pair():
    """Two running trials at epoch 1 of 6, the status written for them, and the sweep holding it."""
    created = plan(sweep(earlyStopping={"pruner": "none"}), []).creates
    trials = [finished(m, [0.5], phase="Running", total=6) for m in created]
    written = plan(sweep(earlyStopping={"pruner": "none"}), trials).status
    return trials, with_status(sweep(earlyStopping={"pruner": "none"}), written)


def test_a_new_epoch_of_a_running_trial_is_progress_only_and_waits_after_a_recent_write() -> None:
    trials, current = running_pair()
    later = copy.deepcopy(trials)
    later[0] = finished(later[0], [0.5, 0.62], phase="Running", total=6)
    later[0]["metadata"]["uid"] = trials[0]["metadata"]["uid"]
    result = plan(current, later)
    assert result.status != dict(current.status) and progress_only(current.status, result.status)
    memory = SweepMemory(status_written=100.0)
    assert SweepReconciler.progress_wait(current, result, memory, 104.0) == PROGRESS_WRITE_SECONDS - 4.0
    assert SweepReconciler.progress_wait(current, result, memory, 100.0 + PROGRESS_WRITE_SECONDS) == 0.0


def test_a_trial_that_ends_is_written_at_once() -> None:
    trials, current = running_pair()
    ended = copy.deepcopy(trials)
    ended[1] = finished(ended[1], [0.5, 0.7], phase="Succeeded")
    result = plan(current, ended)
    assert not progress_only(current.status, result.status)
    assert SweepReconciler.progress_wait(current, result, SweepMemory(status_written=100.0), 101.0) == 0.0


def test_an_unchanged_status_is_not_progress_only() -> None:
    trials, current = running_pair()
    assert not progress_only(current.status, plan(current, trials).status)
