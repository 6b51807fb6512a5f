"""The mutating webhook's last step: check the author's permissions (authorization.py) and stamp the job as
admitted (reconcile/admission.py), or deny it.

Checked on CREATE, and on an UPDATE that changes what shapes the pods; an UPDATE that changes nothing of that keeps the
stamp the job had (restored if the request dropped or altered it; a job the operator reconciled before stamps existed
gets one), so suspending, scaling or editing policies needs no right to create pods. An UPDATE of a job
whose stamp does not verify (it was created while no operator answered) checks whoever sends it: `kubectl annotate
trainingjob NAME ml.example.com/admission=check --overwrite` has the job checked as you (and the stamp replaces
`check`); one that changes nothing of that and leaves the stamp alone passes unstamped (the job stays held).
When the API server cannot answer a SubjectAccessReview, the request is denied (retry): admission never stamps
what it could not check.

TrainingSweeps are stamped the same way for the trials their template makes (admit_sweep), and a sweep's trial is
admitted on the operator's token for it, never on the rights of the operator that creates it (sweeps/admission.py).
"""

from __future__ import annotations

import copy
import datetime
import logging
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as c
from trainingjob.api.replicas import role_counts
from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.reconcile.admission import ANNOTATION, admission_problem, fingerprint, sign, stamp_problem
from trainingjob.sweeps.admission import sign_sweep, sweep_owner, sweep_problem, template_job, trial_problem
from trainingjob.sweeps.types import TrainingSweep
from trainingjob.webhooks.admission import AdmissionRequest, Verdict
from trainingjob.webhooks.authorization import AccessReviewer, denials

logger = logging.getLogger(__name__)


def _patched(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """`obj` with the spec fields our own patch sets (the image default): the object as it will be stored."""
    result = copy.deepcopy(obj)
    for operation in patch:
        path = operation.get("path", "")
        if operation.get("op") == "add" and path.startswith("/spec/") and path.count("/") == 2:
            result.setdefault("spec", {})[path.rsplit("/", 1)[1]] = operation["value"]
    return result


def _job(request: AdmissionRequest, obj: dict[str, Any]) -> TrainingJob:
    metadata = {**(obj.get("metadata") or {}), "namespace": request.namespace, "name": request.name}
    return TrainingJob.from_body({**obj, "metadata": metadata})


def _annotations(obj: dict[str, Any] | None) -> dict[str, Any]:
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def annotation_patch(obj: dict[str, Any], value: str) -> dict[str, Any]:
    """A JSON patch operation that sets our annotation to `value`."""
    if not (obj.get("metadata") or {}).get("annotations"):
        return {"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION: value}}
    return {
        "op": "add",
        "path": "/metadata/annotations/" + ANNOTATION.replace("~", "~0").replace("/", "~1"),
        "value": value,
    }


def kept_stamp(
    request: AdmissionRequest, key: bytes, job: TrainingJob, now: datetime.datetime, since: datetime.datetime | None
) -> str | None:
    """On an UPDATE that changes nothing that shapes the pods of an admitted job: the stamp it had, or a new one
    for a job admitted without one (the operator reconciled it at its generation, e.g. before stamps existed: an
    older operator's job). Its pods stay what they were, so suspending it needs no right to create pods, and it
    is not held later for want of a stamp. None: check the sender."""
    if request.old_object is None:
        return None
    old = _job(request, request.old_object)
    if fingerprint(old) != fingerprint(job):
        return None
    annotations = _annotations(request.old_object)
    if stamp_problem(key, old, annotations) is None:
        return str(annotations[ANNOTATION])
    return sign(key, job, old.uid, now) if admission_problem(key, old, annotations, since) is None else None


async def author_denial(
    request: AdmissionRequest, job: TrainingJob, reviewer: AccessReviewer, config: OperatorConfig, what: str
) -> str | None:
    """Why the request's user may not have `job`'s pods run for them (None: they may). `what` names the object."""
    try:
        refused = await denials(job, request.user, reviewer, config)
    except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as error:
        logger.warning("could not check the permissions of %s: %s", request.user.username, error)
        return f"could not check your permissions (retry): {error}"
    if refused:
        return f"{what} runs its pods for its author, so it needs what they need: " + "; ".join(refused)
    return None


def unasked(request: AdmissionRequest, changed: bool, old_problem: str | None) -> bool:
    """An UPDATE of an object that is not admitted, changing nothing that shapes the pods and not asking for a check
    (the stamp left alone): it passes unstamped, and the object stays held. Nobody is checked for a suspend, and the
    operator's own writes (a trial stopped, a queued job resumed by Kueue's decision) never stamp anything on the
    operator's rights."""
    if request.old_object is None or changed or old_problem is None:
        return False
    return _annotations(request.object).get(ANNOTATION) == _annotations(request.old_object).get(ANNOTATION)


def trial_stamp(request: AdmissionRequest, key: bytes, job: TrainingJob, now: datetime.datetime) -> str | None:
    """The create of a sweep's trial: its stamp if the operator's token (or, reinvoked, our own fresh stamp)
    vouches for it; None for any other create (checked as usual)."""
    owner = sweep_owner(request.object)
    if request.operation != "CREATE" or owner is None:
        return None
    value = _annotations(request.object).get(ANNOTATION)
    sent = _job(request, request.object)
    problem = trial_problem(key, sent, str(owner.get("uid") or ""), value, now)
    if problem is not None and stamp_problem(key, job, _annotations(request.object), created=now) is not None:
        raise TrialRefused(
            f"a TrainingJob controlled by TrainingSweep {owner.get('name')} is a trial, created by the operator for "
            f"a sweep whose author was checked; this one does not carry the operator's token: {problem}"
        )
    return sign(key, job, "", now)


class TrialRefused(Exception):
    """A trial's create without the operator's token."""


async def admit(
    request: AdmissionRequest,
    verdict: Verdict,
    key: bytes,
    reviewer: AccessReviewer,
    config: OperatorConfig,
    now: datetime.datetime,
    since: datetime.datetime | None = None,
) -> Verdict:
    """`verdict` (the defaults' patch) with the admission stamp added, or denied with what the author lacks.
    `since`: when stamping began (reconcile/admission.py: older jobs an operator reconciled count as admitted)."""
    if not verdict.allowed:
        return verdict
    final = _patched(request.object, verdict.patch)
    job = _job(request, final)
    if beyond_schema(job):
        return verdict
    try:
        stamp = trial_stamp(request, key, job, now) or kept_stamp(request, key, job, now, since)
    except TrialRefused as refused:
        return verdict.deny(str(refused))
    if stamp is None:
        old = None if request.old_object is None else _job(request, request.old_object)
        if old is not None and unasked(
            request,
            fingerprint(old) != fingerprint(job),
            admission_problem(key, old, _annotations(request.old_object), since),
        ):
            return verdict
        denial = await author_denial(request, job, reviewer, config, "a TrainingJob")
        if denial is not None:
            return verdict.deny(denial)
        uid = str((request.old_object or {}).get("metadata", {}).get("uid") or "")
        stamp = sign(key, job, uid, now)
    if _annotations(final).get(ANNOTATION) != stamp:
        verdict.patch.append(annotation_patch(final, stamp))
    return verdict


async def admit_sweep(
    request: AdmissionRequest,
    key: bytes,
    reviewer: AccessReviewer,
    config: OperatorConfig,
    now: datetime.datetime,
) -> Verdict:
    """A TrainingSweep's author checked for the trials its template makes, and the sweep stamped
    (sweeps/admission.py); kept, unchecked, over an UPDATE that leaves the template's fingerprint as it was."""
    verdict = Verdict()
    sweep = _sweep(request, request.object)
    trial = template_job(sweep)
    if beyond_schema(trial):
        return verdict
    stamp = None
    if request.old_object is not None:
        old = _sweep(request, request.old_object)
        same = fingerprint(template_job(old)) == fingerprint(trial)
        problem = sweep_problem(key, old)
        if same and problem is None:
            stamp = str(old.annotations[ANNOTATION])
        elif unasked(request, not same, problem):
            return verdict
    if stamp is None:
        denial = await author_denial(request, trial, reviewer, config, "a TrainingSweep")
        if denial is not None:
            return verdict.deny(denial)
        stamp = sign_sweep(key, sweep, str((request.old_object or {}).get("metadata", {}).get("uid") or ""), now)
    if _annotations(request.object).get(ANNOTATION) != stamp:
        verdict.patch.append(annotation_patch(request.object, stamp))
    return verdict


def beyond_schema(job: TrainingJob) -> bool:
    """A pod count above the schema's maximum (MAX_WORKERS): left unstamped, for the API server to refuse with the
    schema's own message. This webhook runs before the schema is checked, and the author's check builds a pod,
    whose peers' host names are one per pod: `workers: 1000000000000` held the operator's event loop until its
    Lease's renew deadline ended the process (found by the spec fuzzing test)."""
    return any(count > c.MAX_WORKERS for count in role_counts(job.spec).values())


def _sweep(request: AdmissionRequest, obj: dict[str, Any]) -> TrainingSweep:
    metadata = {**(obj.get("metadata") or {}), "namespace": request.namespace, "name": request.name}
    return TrainingSweep.from_body({**obj, "metadata": metadata})
