"""What the TrainingSweep controller reconciles and owns, and what it keeps of each object (see
operator/trainingjob/watches.py for how indexes work).

The trials are TrainingJobs: they come from the TrainingJob controller's informer (same resource, same selector,
so one listing and one watch serve both controllers), each trial filed under its sweep as a TrialView.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.kube.reflector import Resource, object_key
from trainingjob.operator.runtime.controller import Registration
from trainingjob.operator.runtime.informers import Watch
from trainingjob.operator.runtime.store import IndexName
from trainingjob.operator.runtime.views import labels, trimmed_body
from trainingjob.operator.trainingjob.watches import TRAININGJOBS
from trainingjob.sweeps.trials import TrialView, trial_view

SWEEPS = Resource(k.GROUP, k.SWEEP_VERSION, k.SWEEP_PLURAL, k.SWEEP_KIND)
Entry = tuple[Hashable, Any] | None

SWEEP_BODIES: IndexName[Mapping[str, Any]] = IndexName("trainingsweep_bodies")
SWEEP_TRIALS: IndexName[TrialView] = IndexName("sweep_trials")


def sweep_body(body: Mapping[str, Any]) -> Entry:
    return object_key(body), trimmed_body(body, k.SWEEP_API_VERSION, k.SWEEP_KIND)


def sweep_trial(body: Mapping[str, Any]) -> Entry:
    """A TrainingJob labelled with a sweep's name, under that sweep's key; other jobs are not filed."""
    sweep = labels(body).get(k.LABEL_SWEEP)
    if not sweep:
        return None
    view = trial_view(trimmed_body(body, k.WATCHED_API_VERSION, k.KIND))
    return ((object_key(body)[0], sweep), view) if view is not None else None


REGISTRATION = Registration(
    SWEEPS,
    SWEEP_BODIES,
    owns=(
        Watch(SWEEPS, "", {SWEEP_BODIES: sweep_body}),
        Watch(TRAININGJOBS, "", {SWEEP_TRIALS: sweep_trial}),
    ),
)
