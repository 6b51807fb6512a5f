"""The mutating webhook: what the schema cannot default.

- A v1 job without spec.image gets one derived from spec.model by the operator's --default-image pattern (the
  guide's `training-image:{model}`; `{model}` and `{framework}` are replaced), unless it names a runtime
  (spec.runtimeRef), whose image it runs. The schema's rule that requires an
  image runs after the webhook, so a job is never stored without one.
- A new job gets the operator's finalizer, in any version: otherwise the operator's first reconcile adds it with a
  write of its own, one per job (and one more watch event for every watcher of jobs). The operator still adds it
  to a job that comes without (the webhook fails closed, but a configuration removed by hand or an older install
  lets a job be stored without it).

The API server calls the webhook only when one of the two applies (matchConditions in api/webhook_config.py).
"""

from __future__ import annotations

import re
from typing import Any

from trainingjob.api import constants as k
from trainingjob.api.managed_by import managed_here
from trainingjob.webhooks.admission import AdmissionRequest, Verdict

# An image reference as the container runtimes parse it: [registry[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*:[0-9a-fA-F]{{32,}})?$"
)


def derive_image(pattern: str, model: str, framework: str) -> str:
    return pattern.replace("{model}", model).replace("{framework}", framework)


def default_image(request: AdmissionRequest, pattern: str | None) -> Verdict:
    """The patch that sets spec.image, or nothing (the schema's rule then explains what is missing)."""
    verdict = Verdict()
    spec = request.spec
    if spec.get("image") or spec.get("runtimeRef"):  # a job naming a runtime gets the runtime's image, if any
        return verdict
    old_image = (request.old_spec or {}).get("image")
    if request.operation == "UPDATE" and old_image:
        # A replace that leaves the image out keeps the one the job runs: re-deriving it could restart the workers.
        verdict.patch.append({"op": "add", "path": "/spec/image", "value": old_image})
        return verdict.warn(f"spec.image was left out: kept {old_image}, the image this job already runs")
    model = spec.get("model")
    if not pattern or not model:
        return verdict
    image = derive_image(pattern, str(model), str(spec.get("framework") or ""))
    if not IMAGE_REFERENCE.match(image):
        return verdict.deny(
            f"spec.image is unset and cannot be derived from spec.model {model!r}: {image!r} (the operator's "
            f"--default-image {pattern!r}) is not a valid image reference; set spec.image"
        )
    verdict.patch.append({"op": "add", "path": "/spec/image", "value": image})
    return verdict.warn(f"spec.image set to {image}, derived from spec.model by the operator's --default-image")


def finalizer_patch(request: AdmissionRequest) -> list[dict[str, Any]]:
    """The JSON patch that adds the operator's finalizer to a job being created without it; else nothing.

    Only on CREATE: a job that lost its finalizer later is being deleted (or had it removed on purpose), and the
    operator, not admission, decides what a live job needs."""
    if request.operation != "CREATE" or not managed_here(request.object):
        return []  # another controller's job (spec.managedBy) is deleted without waiting for this operator
    finalizers = (request.object.get("metadata") or {}).get("finalizers")
    if not finalizers:
        return [{"op": "add", "path": "/metadata/finalizers", "value": [k.FINALIZER]}]
    if k.FINALIZER in finalizers:
        return []
    return [{"op": "add", "path": "/metadata/finalizers/-", "value": k.FINALIZER}]


def mutate(request: AdmissionRequest, pattern: str | None) -> Verdict:
    """Both defaults in one answer: the image (v1 requests only; v1alpha1 requires one) and the finalizer."""
    verdict = default_image(request, pattern) if request.version == k.V1 else Verdict()
    if verdict.allowed:
        verdict.patch.extend(finalizer_patch(request))
    return verdict
