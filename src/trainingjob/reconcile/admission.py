"""The admission stamp: proof, signed with a key only the operator has, that the mutating webhook checked the
job's creator may run the pods it asks for (webhooks/authorization.py), and the hold for a job without one.

Why: the operator creates its pods with its own rights (issue 41: a ServiceAccount allowed only TrainingJobs got a
privileged root pod with a hostPath volume and a Secret), and a job may reach the API server's storage without the
webhook having checked it: the webhook fails closed (failurePolicy Fail), but its configuration can be removed or
edited by hand, and an older install failed open (a job created while no operator answered was stored unchecked).
So the reconciler creates pods only for a job whose stamp verifies; any other is held (condition Blocked, reason
NotAdmitted) until it is stamped.

What is signed: the job's namespace and name, its uid (on UPDATE; a new object has none yet), the fingerprint of
every spec field that shapes its pods but the worker count (fingerprint below; builders.common.spec_hash: version-
and default-insensitive, so the v1 object the operator watches and the v1alpha1 one a user sent give the same), and
when it was signed. A stamp on a new object must be from within STAMP_WINDOW of its creationTimestamp, so one copied
from an earlier job of the same name and spec is no good later. Changes that shape no pod (suspend, policies, the
worker count) keep the stamp valid.

A job created before this cluster's operators began stamping (the key's `admission.since`, webhooks/tls.py) that
the operator already reconciled at its current generation (status.observedGeneration) counts as admitted: jobs from
before the stamp existed keep running, and the hold never writes observedGeneration. Only those: whoever may write
trainingjobs/status can set observedGeneration on any job, so for a job created since, the status is no evidence
(issue 41); its creationTimestamp is the API server's own.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.status import Phase
from trainingjob.api.times import format_time, parse_time
from trainingjob.api.types import TrainingJob
from trainingjob.builders.common import spec_hash
from trainingjob.planning.actions import AddFinalizer, Event
from trainingjob.reconcile.conditions import DesiredCondition, merge_conditions
from trainingjob.reconcile.plan import JobPlan

ANNOTATION = k.ADMISSION_ANNOTATION
STAMP_VERSION = "v1"
# creationTimestamp - signing time: the API server stores the object right after admission; allow for clock skew.
STAMP_WINDOW = (datetime.timedelta(seconds=-60), datetime.timedelta(seconds=300))
HOLD_REASON = "NotAdmitted"


@dataclass(frozen=True)
class Stamp:
    signed_at: int  # unix seconds
    uid: str  # "" for a new object
    mac: str


def fingerprint(job: TrainingJob) -> str:
    """What a stamp vouches for: every spec field that shapes the pods except the worker count. Scaling adds or
    removes pods of the very shape the author was checked for, so it grants nothing new; and the scale subresource
    (kubectl scale, autoscalers, the UI's Scale) reaches no webhook registered for trainingjobs, so a stamp over the
    count would hold every job scaled that way."""
    return spec_hash(dataclasses.replace(job, raw_spec={k: v for k, v in job.raw_spec.items() if k != "workers"}))


@dataclass(frozen=True)
class Subject:
    """What a stamp is made for: the kind (a TrainingJob's stamp, a TrainingSweep's, or the operator's token for a
    sweep's trial, sweeps/admission.py; part of what is signed, so one kind's stamp never passes for another's),
    the object, its uid (a trial token: its sweep's), when it was created, and the fingerprint of what was checked."""

    kind: str
    namespace: str
    name: str
    uid: str
    created: datetime.datetime | None
    fingerprint: str


def job_subject(job: TrainingJob, created: datetime.datetime | None = None) -> Subject:
    """The job as its stamp vouches for it; `created` stands in for a creationTimestamp not set yet (admission)."""
    when = created or parse_time(job.creation_timestamp)
    return Subject(k.KIND, job.namespace, job.name, job.uid, when, fingerprint(job))


def _mac(key: bytes, subject: Subject, uid: str, signed_at: int) -> str:
    # A TrainingJob's payload is what it was before other kinds had stamps: stamps made then still verify.
    scope = STAMP_VERSION if subject.kind == k.KIND else f"{STAMP_VERSION}:{subject.kind}"
    payload = "\n".join((scope, subject.namespace, subject.name, uid, subject.fingerprint, str(signed_at)))
    digest = hmac.new(key, payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def signature(key: bytes, subject: Subject, uid: str, now: datetime.datetime) -> str:
    """The annotation value vouching for `subject`, signed now; `uid` is "" for an object not stored yet."""
    signed_at = int(now.timestamp())
    return f"{STAMP_VERSION}.{signed_at}.{uid or '-'}.{_mac(key, subject, uid, signed_at)}"


def sign(key: bytes, job: TrainingJob, uid: str, now: datetime.datetime) -> str:
    """The annotation value for `job` (its spec as it will be stored), signed now."""
    return signature(key, job_subject(job), uid, now)


def parse_stamp(value: Any) -> Stamp | None:
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 4 or parts[0] != STAMP_VERSION or not parts[1].isdigit():
        return None
    return Stamp(int(parts[1]), "" if parts[2] == "-" else parts[2], parts[3])


def signature_problem(key: bytes, subject: Subject, value: Any) -> str | None:
    """Why `value` does not vouch for `subject` (None: it does)."""
    stamp = parse_stamp(value)
    if stamp is None:
        return "it carries no admission stamp"
    expected = _mac(key, subject, stamp.uid, stamp.signed_at)
    if not hmac.compare_digest(expected, stamp.mac):
        return "its admission stamp is not for this spec (it changed while no admission webhook answered)"
    if stamp.uid:
        return None if stamp.uid == subject.uid else "its admission stamp was made for another object"
    signed = datetime.datetime.fromtimestamp(stamp.signed_at, datetime.UTC)
    if subject.created is None or not STAMP_WINDOW[0] <= subject.created - signed <= STAMP_WINDOW[1]:
        return "its admission stamp was made for an earlier object of the same name"
    return None


def stamp_problem(
    key: bytes, job: TrainingJob, annotations: Mapping[str, Any], created: datetime.datetime | None = None
) -> str | None:
    """Why the job's stamp does not vouch for it (None: it does)."""
    return signature_problem(key, job_subject(job, created), annotations.get(ANNOTATION))


def admission_problem(
    key: bytes, job: TrainingJob, annotations: Mapping[str, Any], since: datetime.datetime | None
) -> str | None:
    """Why the operator must not create pods for `job` (None: it may). `since`: when stamping began (None: unknown,
    and no job is admitted without a stamp)."""
    if legacy(job, since):
        return None  # from before stamps, and reconciled at this very spec by an operator of then
    return stamp_problem(key, job, annotations)


def legacy(job: TrainingJob, since: datetime.datetime | None) -> bool:
    """A job created before stamps existed that an operator reconciled at its current generation."""
    created = parse_time(job.creation_timestamp)
    if since is None or created is None or created >= since:
        return False
    return job.status.phase is not None and job.status.observed_generation == job.generation


def hold_message(problem: str, kind: str = "trainingjob", what: str = "pods", whose: str = "job") -> str:
    return (
        f"not admitted: {problem}. The operator creates no {what} until the admission webhook has checked that "
        f"the {whose}'s author may run their pods; it was created or changed while no operator answered the "
        f"webhook. To have it checked now, as you: kubectl annotate {kind} <name> {ANNOTATION}=check --overwrite "
        "(or delete and create it again)"
    )


def hold(job: TrainingJob, problem: str, now: datetime.datetime) -> JobPlan:
    """The plan for a job that is not admitted: nothing but its finalizer, condition Blocked (reason NotAdmitted)
    and, the first time, a Warning Event. status.observedGeneration stays as it was: the hold admits nothing."""
    message = hold_message(problem)
    previous = job.status
    blocked = previous.condition("Blocked")
    conditions = merge_conditions(
        previous.conditions or (),
        [DesiredCondition("Blocked", True, HOLD_REASON, message)],
        format_time(now),
        job.generation,
    )
    status = previous.replace(phase=previous.phase or Phase.PENDING, message=message, conditions=tuple(conditions))
    actions: list[Any] = [] if k.FINALIZER in job.finalizers else [AddFinalizer()]
    newly = blocked is None or blocked.get("reason") != HOLD_REASON or blocked.get("status") != "True"
    events = [Event("Warning", HOLD_REASON, message)] if newly else []
    return JobPlan(actions=actions, status=status, events=events)
