"""The mutating webhook's last step: check the author's permissions (authorization.py) and stamp the job as
admitted (reconcile/admission.py), or deny it.

Checked on CREATE, and on an UPDATE that changes what shapes the pods; an UPDATE that changes nothing of that keeps the
stamp the job had (restored if the request dropped or altered it; a job the operator reconciled before stamps existed
gets one), so suspending, scaling or editing policies needs no right to create pods. An UPDATE of a job
whose stamp does not verify (it was created while no operator answered) checks whoever sends it: `kubectl annotate
trainingjob NAME ml.example.com/admission=check --overwrite` has the job checked as you (and the stamp replaces
`check`). When the API server cannot answer a SubjectAccessReview, the request is denied (retry): admission never stamps
what it could not check.
"""

from __future__ import annotations

import copy
import datetime
import logging
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.types import TrainingJob
from trainingjob.config import OperatorConfig
from trainingjob.reconcile.admission import ANNOTATION, admission_problem, fingerprint, sign, stamp_problem
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


def kept_stamp(request: AdmissionRequest, key: bytes, job: TrainingJob, now: datetime.datetime) -> str | None:
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
    return sign(key, job, old.uid, now) if admission_problem(key, old, annotations) is None else None


async def admit(
    request: AdmissionRequest,
    verdict: Verdict,
    key: bytes,
    reviewer: AccessReviewer,
    config: OperatorConfig,
    now: datetime.datetime,
) -> Verdict:
    """`verdict` (the defaults' patch) with the admission stamp added, or denied with what the author lacks."""
    if not verdict.allowed:
        return verdict
    final = _patched(request.object, verdict.patch)
    job = _job(request, final)
    stamp = kept_stamp(request, key, job, now)
    if stamp is None:
        try:
            refused = await denials(job, request.user, reviewer, config)
        except (ApiException, OSError, TimeoutError) as error:
            logger.warning("could not check the permissions of %s: %s", request.user.username, error)
            return verdict.deny(f"could not check your permissions (retry): {error}")
        if refused:
            return verdict.deny(
                "a TrainingJob runs its pods for its author, so it needs what they need: " + "; ".join(refused)
            )
        uid = str((request.old_object or {}).get("metadata", {}).get("uid") or "")
        stamp = sign(key, job, uid, now)
    if _annotations(final).get(ANNOTATION) != stamp:
        verdict.patch.append(annotation_patch(final, stamp))
    return verdict
