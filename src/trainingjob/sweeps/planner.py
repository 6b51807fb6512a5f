"""The TrainingSweep planner: (sweep, its trials, what this process remembers, now) -> what to create, stop and
record. Pure: the Optuna work goes through `engine` (sweeps/study.py, or None when the `[sweeps]` extra is not
installed), and every write is the applier's (operator/trainingsweep/apply.py).

Order of a plan: judge running trials (prune), decide whether the sweep is over (goal, maxTrials, failures),
stop what must stop, then sample new trials up to `parallelism`. A new trial is sampled only when no trial this
process created is still missing from its cache (expectations): a lagging watch must not make it sample the same
index twice (the name would meet AlreadyExists, but the sample would have been wasted).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from trainingjob.api.constants import ANNOTATION_TRIAL_STOPPED
from trainingjob.api.sweep_phases import SweepPhase, TrialState
from trainingjob.api.times import format_time
from trainingjob.planning.actions import Event
from trainingjob.planning.plan import Plan
from trainingjob.reconcile.admission import HOLD_REASON, hold_message
from trainingjob.sweeps.builders import attrs_patch, stop_patch, trial_manifest
from trainingjob.sweeps.status import Outcome, Scored, best, scored, sweep_status, trial_events
from trainingjob.sweeps.trials import TrialView, trial_view
from trainingjob.sweeps.types import TrainingSweep
from trainingjob.sweeps.validation import spec_problems

UNAVAILABLE = (
    "this operator runs without the sweep controller: install the `sweeps` extra (pip install "
    "'trainingjob-operator[sweeps]', Optuna) where the operator runs and restart it"
)


@dataclass(frozen=True)
class ObservedSweep:
    trials: Sequence[TrialView]
    pending_creations: frozenset[str] = frozenset()
    judged: Mapping[str, int] = field(default_factory=dict)  # trial name -> newest epoch already judged
    private: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # index -> attributes kept in memory
    rejection: str = ""  # the API server's refusal of a trial this process tried to create
    not_admitted: str | None = None  # why the sweep's stamp does not vouch for it (sweeps/admission.py)


@dataclass(frozen=True)
class TrialWrite:
    """A write to one trial: its name and uid (a newer namesake is left alone), the merge patch, and Events to
    record on the trial and on the sweep."""

    name: str
    uid: str
    patch: dict[str, Any]
    events: tuple[Event, ...] = ()


@dataclass
class SweepPlan(Plan[dict[str, Any]]):
    """The shared Plan (its status in the stored shape, its Events on the sweep) with the sweep's own writes: trial
    manifests to create, marks on trials, and what this process keeps in memory (attributes of new trials, the
    newest epoch judged of each trial). A sweep asks for no child actions: its trials are the writes above."""

    status: dict[str, Any] = field(default_factory=dict)
    creates: list[dict[str, Any]] = field(default_factory=list)  # trial manifests
    private: dict[int, dict[str, Any]] = field(default_factory=dict)  # attributes of new trials kept in memory
    writes: list[TrialWrite] = field(default_factory=list)
    judged: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class NewTrials:
    """What sampling decided: the trials' manifests and the attributes kept in memory for them."""

    creates: list[dict[str, Any]] = field(default_factory=list)
    private: dict[int, dict[str, Any]] = field(default_factory=dict)


def plan_sweep(
    sweep: TrainingSweep, observed: ObservedSweep, engine: ModuleType | None, now: datetime.datetime
) -> SweepPlan:
    """The whole plan for one sweep; `now` stamps its times and condition transitions."""
    stamp = format_time(now)
    trials = [t for t in observed.trials if t.controller_uid == sweep.uid]
    if engine is None:
        outcome = Outcome(SweepPhase.PENDING, "SweepControllerUnavailable", UNAVAILABLE)
        status = sweep_status(sweep, scored(sweep, trials), outcome, stamp)
        return SweepPlan(status=status, events=phase_events(sweep, outcome))
    if sweep.deleting:
        return SweepPlan(status=dict(sweep.status))
    writes, judged = prunes(sweep, trials, observed, engine)
    entries = scored(sweep, apply_writes(trials, writes))
    created = next_index(sweep, trials)
    outcome = judge_sweep(sweep, entries, observed.rejection, created)
    new = NewTrials()
    if outcome.finished:
        writes += stops(entries, outcome)
    elif observed.not_admitted is not None:
        # No trial for a sweep whose author nobody checked; the trials it has keep their own stamps.
        message = hold_message(observed.not_admitted, "trainingsweep", "trials", "sweep")
        outcome = Outcome(SweepPhase.PENDING, HOLD_REASON, message)
    elif not observed.pending_creations:
        new = create_trials(sweep, trials, entries, observed, engine, created)
        if new.creates:
            entries = scored(sweep, [*apply_writes(trials, writes), *(trial_view(m) for m in new.creates)])
            outcome = Outcome(SweepPhase.RUNNING)
    return SweepPlan(
        status=sweep_status(sweep, entries, outcome, stamp, created),
        events=trial_events(sweep.status, entries) + phase_events(sweep, outcome),
        creates=new.creates,
        private=new.private,
        writes=writes,
        judged=judged,
    )


def next_index(sweep: TrainingSweep, trials: Sequence[TrialView]) -> int:
    """The index of the next trial: past every trial seen, including those deleted since (status.trialsCreated
    remembers them). From the trials alone, deleting the newest trial of a running sweep would have its index
    sampled again, and deleting an older one would leave a sweep short of maxTrials that never ends. Counted from
    the trials this process has seen in its cache, never from the ones it is about to create: a creation refused
    for now (quota) is tried again under the same index."""
    recorded = sweep.status.get("trialsCreated")
    remembered = recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else 0
    return max(remembered, max((t.index for t in trials), default=-1) + 1)


def apply_writes(trials: Sequence[TrialView], writes: Sequence[TrialWrite]) -> list[TrialView]:
    """The trials as they will be once the plan's stop marks are written (the status says so at once)."""
    marks = {w.name: w.patch["metadata"]["annotations"].get(ANNOTATION_TRIAL_STOPPED) for w in writes}
    return [replace(t, stopped=marks[t.name]) if marks.get(t.name) else t for t in trials]


def running(entries: Sequence[Scored]) -> list[Scored]:
    return [entry for entry in entries if entry.state is TrialState.RUNNING]


def prunes(
    sweep: TrainingSweep, trials: Sequence[TrialView], observed: ObservedSweep, engine: Any
) -> tuple[list[TrialWrite], dict[str, int]]:
    """Ask the pruner about each running trial that reported an epoch not judged yet; a trial at its last epoch
    is not judged (there is nothing left to save). Returns the writes and each reporting trial's newest epoch."""
    writes: list[TrialWrite] = []
    judged: dict[str, int] = {}
    if sweep.spec.early_stopping.pruner == "none":
        return writes, judged
    metric = sweep.spec.objective.metric
    for entry in running(scored(sweep, trials)):
        trial = entry.trial
        series = trial.series(metric)
        if not series or trial.deleting:
            continue
        epoch = series[-1][0]
        judged[trial.name] = epoch
        if observed.judged.get(trial.name, -1) >= epoch or (trial.total_epochs and epoch >= trial.total_epochs):
            continue
        judgement = engine.judge(sweep, trials, trial, observed.private)
        patches: list[dict[str, Any]] = []
        events: tuple[Event, ...] = ()
        if judgement.attrs and judgement.attrs != engine.recorded_attrs(trial):
            patches.append(attrs_patch(judgement.attrs))
        if judgement.prune:
            mark = f"Pruned at epoch {epoch}: {metric} {series[-1][1]:.6g} is worse than the other trials'"
            patches.append(stop_patch(mark))
            events = (Event("Normal", "TrialPruned", f"trial {trial.name}: {mark}"),)
        if patches:
            writes.append(TrialWrite(trial.name, trial.uid, merged_patches(patches), events))
    return writes, judged


def merged_patches(patches: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge patches of a trial's annotations and spec into one write."""
    annotations: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    for patch in patches:
        annotations.update(patch.get("metadata", {}).get("annotations", {}))
        spec.update(patch.get("spec", {}))
    return {"metadata": {"annotations": annotations}, **({"spec": spec} if spec else {})}


def judge_sweep(sweep: TrainingSweep, entries: Sequence[Scored], rejection: str, created: int) -> Outcome:
    """Whether the sweep is over, and why; `created`: trials created so far, deleted ones included."""
    spec = sweep.spec
    problems = spec_problems(sweep)
    if problems:
        return Outcome(SweepPhase.FAILED, "InvalidSpec", "; ".join(problems)[:1024])
    if rejection:
        return Outcome(SweepPhase.FAILED, "InvalidTemplate", f"the API server refused a trial: {rejection}"[:1024])
    ended = ended_before(sweep)
    if ended is not None:
        return ended
    failed = [entry for entry in entries if entry.state is TrialState.FAILED]
    if len(failed) > spec.max_failed_trials:
        unreported = all(entry.reason.startswith("ObjectiveNotReported") for entry in failed)
        reasons = "; ".join(f"{entry.trial.name}: {entry.reason}" for entry in failed[-3:])
        message = f"{len(failed)} trials failed (maxFailedTrials {spec.max_failed_trials}): {reasons}"
        reason = "ObjectiveNotReported" if unreported else "TooManyFailedTrials"
        return Outcome(SweepPhase.FAILED, reason, message[:1024])
    top = best(sweep, entries)
    if top is not None and top.value is not None and spec.objective.reached(top.value):
        message = f"trial {top.trial.name} reached the goal: {spec.objective.metric} {top.value:.6g}"
        return Outcome(SweepPhase.SUCCEEDED, "GoalReached", message)
    if max(created, len(entries)) >= spec.max_trials and not running(entries):
        if top is None:
            return Outcome(SweepPhase.FAILED, "NoTrialSucceeded", f"none of the {len(entries)} trials succeeded")
        message = f"{len(entries)} trials ran; best: {top.trial.name} ({spec.objective.metric} {top.value:.6g})"
        return Outcome(SweepPhase.SUCCEEDED, "MaxTrialsReached", message)
    return Outcome(SweepPhase.RUNNING if entries else SweepPhase.PENDING, "" if entries else "NoTrialYet")


def ended_before(sweep: TrainingSweep) -> Outcome | None:
    """A sweep that ended stays ended until its spec changes (a larger maxTrials goes on from there). Its trials may
    go after it ended (deleted by hand, or by the deletion of their namespace, which may come before the sweep's):
    judged from the trials left, it would start over. And a sweep failed for a refused template stays failed: the
    refusal was only in the memory of the process that met it, and trying again would only meet it again."""
    if sweep.status.get("observedGeneration") != sweep.generation:
        return None
    phase = sweep.phase
    if phase is None or not phase.finished:
        return None
    kind = "Complete" if phase is SweepPhase.SUCCEEDED else "Failed"
    for condition in sweep.status.get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == "True":
            return Outcome(phase, str(condition.get("reason") or ""), str(condition.get("message") or ""))
    return None


def stops(entries: Sequence[Scored], outcome: Outcome) -> list[TrialWrite]:
    """Trials still running when the sweep ends are suspended and marked Stopped."""
    mark = f"Stopped: the sweep ended ({outcome.reason})"
    return [
        TrialWrite(entry.trial.name, entry.trial.uid, stop_patch(mark))
        for entry in running(entries)
        if not entry.trial.deleting
    ]


def create_trials(
    sweep: TrainingSweep,
    trials: list[TrialView],
    entries: Sequence[Scored],
    observed: ObservedSweep,
    engine: Any,
    number: int,
) -> NewTrials:
    """Sample trials, from index `number` on, until `parallelism` run or `maxTrials` were created. Each sample sees
    the ones before."""
    spec = sweep.spec
    new = NewTrials()
    busy = len(running(entries))
    known = list(trials)
    while busy < spec.parallelism and number < spec.max_trials:
        sample = engine.ask(sweep, known, number, {**observed.private, **new.private})
        manifest = trial_manifest(sweep, number, sample.params, sample.attrs)
        new.creates.append(manifest)
        if sample.private:
            new.private[number] = sample.private
        view = trial_view(manifest)
        assert view is not None
        known.append(view)
        busy += 1
        number += 1
    return new


def phase_events(sweep: TrainingSweep, outcome: Outcome) -> list[Event]:
    """An Event when the phase changes: the sweep's start, its end, or the controller missing."""
    if sweep.phase is outcome.phase:
        return []
    if outcome.phase is SweepPhase.SUCCEEDED:
        return [Event("Normal", outcome.reason, outcome.message)]
    if outcome.phase is SweepPhase.FAILED:
        return [Event("Warning", outcome.reason, outcome.message)]
    if outcome.reason in ("SweepControllerUnavailable", HOLD_REASON):
        return [Event("Warning", outcome.reason, outcome.message)]
    return []
