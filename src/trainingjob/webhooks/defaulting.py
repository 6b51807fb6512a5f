"""The mutating webhook: defaults the schema cannot express.

Only one today: a v1 job without spec.image gets one derived from spec.model by the operator's --default-image
pattern (the guide's `training-image:{model}`; `{model}` and `{framework}` are replaced). The API server calls it
only for v1 requests without an image (see api/webhook_config.py), and the schema's rule that requires an image
runs after it, so a job is never stored without one.
"""

from __future__ import annotations

import re

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
    if spec.get("image"):
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
