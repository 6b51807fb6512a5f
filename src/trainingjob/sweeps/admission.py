"""A TrainingSweep grants no more than its author could do (issue 41): its trials are TrainingJobs the operator
creates with its own account, so the author check of a trial's create would judge the operator. Instead:

- the mutating webhook checks the sweep's author when the sweep is created, or its trial template changed, exactly
  as for a TrainingJob (webhooks/authorization.py), on the trial the template makes (`template_job`), and stamps
  the sweep (`sign_sweep`: kind TrainingSweep, its namespace, name, uid, the template's fingerprint);
- the sweep controller creates trials only for a sweep whose stamp verifies (`sweep_problem`; any other is held:
  phase Pending, reason NotAdmitted, an Event saying how to have it checked), and gives each trial a token
  (`sign_trial`: kind TrainingSweepTrial, the trial's namespace and name, the sweep's uid, the trial's own
  fingerprint, signed now) that only the operator's key makes;
- the webhook admits the create of a TrainingJob whose controller is a TrainingSweep on that token alone
  (`trial_problem`: made for this trial, this sweep, this very spec, within STAMP_WINDOW of now), never on the
  requester's rights, and replaces it with the job's ordinary stamp (reconcile/admission.py).

So a trial runs only what a check of the sweep's author allowed: the template as checked, with values sampled
from the search space (hyperparameters, which only set environment values and the job's own ConfigMap).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.times import parse_time
from trainingjob.api.types import TrainingJob
from trainingjob.reconcile.admission import (
    ANNOTATION,
    STAMP_WINDOW,
    Subject,
    fingerprint,
    parse_stamp,
    signature,
    signature_problem,
)
from trainingjob.sweeps.builders import trial_manifest
from trainingjob.sweeps.types import TrainingSweep

TRIAL_KIND = "TrainingSweepTrial"


def template_job(sweep: TrainingSweep) -> TrainingJob:
    """The sweep's first trial as the operator creates it, before sampling: what the author is checked for. Every
    trial differs from it only by its name and hyperparameters' values, neither of which the check looks at (the
    name only tells the job's own ConfigMap, which needs no grant)."""
    return TrainingJob.from_body(trial_manifest(sweep, 0, {}, {}))


def sweep_subject(sweep: TrainingSweep) -> Subject:
    return Subject(
        k.SWEEP_KIND,
        sweep.namespace,
        sweep.name,
        sweep.uid,
        parse_time(sweep.creation_timestamp),
        fingerprint(template_job(sweep)),
    )


def sign_sweep(key: bytes, sweep: TrainingSweep, uid: str, now: datetime.datetime) -> str:
    """The sweep's stamp: its author was checked for the trials its template makes."""
    return signature(key, sweep_subject(sweep), uid, now)


def sweep_problem(key: bytes, sweep: TrainingSweep) -> str | None:
    """Why the operator must not create trials for `sweep` (None: it may)."""
    return signature_problem(key, sweep_subject(sweep), sweep.annotations.get(ANNOTATION))


def trial_subject(job: TrainingJob, sweep_uid: str, now: datetime.datetime) -> Subject:
    return Subject(TRIAL_KIND, job.namespace, job.name, sweep_uid, now, fingerprint(job))


def sign_trial(key: bytes, manifest: Mapping[str, Any], sweep_uid: str, now: datetime.datetime) -> str:
    """The operator's token for a trial it is about to create for an admitted sweep."""
    return signature(key, trial_subject(TrainingJob.from_body(manifest), sweep_uid, now), sweep_uid, now)


def trial_problem(key: bytes, job: TrainingJob, sweep_uid: str, value: Any, now: datetime.datetime) -> str | None:
    """Why `value` is no token of the operator's for this trial of sweep `sweep_uid`, made just now (None: it is)."""
    problem = signature_problem(key, trial_subject(job, sweep_uid, now), value)
    if problem is not None:
        return problem
    stamp = parse_stamp(value)
    assert stamp is not None
    signed = datetime.datetime.fromtimestamp(stamp.signed_at, datetime.UTC)
    if stamp.uid != sweep_uid or not STAMP_WINDOW[0] <= now - signed <= STAMP_WINDOW[1]:
        return "its trial token is not from the operator for this sweep just now"
    return None


def sweep_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The TrainingSweep that controls this object (its ownerReference), if one does."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            isinstance(owner, Mapping)
            and owner.get("controller")
            and owner.get("kind") == k.SWEEP_KIND
            and str(owner.get("apiVersion", "")).startswith(f"{k.GROUP}/")
        ):
            return owner
    return None
