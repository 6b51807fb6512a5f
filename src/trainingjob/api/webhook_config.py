"""How the API server reaches the operator's webhooks: the CRD's conversion stanza and the two admission webhook
configurations, as pure data (deploy/crd/ is generated from here; webhooks/registration.py keeps them pointed at a
live operator and injects its CA).

Shipped pointing at https://127.0.0.1:9443, where `tj operator` run outside the cluster listens by default, so
`kubectl apply -f deploy/crd/ -f deploy/rbac/` plus `tj operator` is a working install on a local cluster;
deploy/base/ patches them to the operator's Service for the in-cluster install.

The mutating webhook fails closed (failurePolicy Fail): it stamps what it admits (webhooks/stamping.py), and a
create or spec change it never saw would be stored unchecked and held by the operator until someone had it checked
(issue 41: the kill points met a job created while the operator was down, stored without a stamp). So while no
operator answers, creates and spec changes of TrainingJobs and TrainingSweeps are refused (`failed calling webhook
"default.trainingjobs.ml.example.com"`: retry once the operator is back); reads, deletes, status and metadata writes
(finalizers, labels) call no webhook (matchConditions below) and keep working. The operator still holds any job
stored without a valid stamp (reconcile/admission.py: a configuration edited or removed by hand, an older install).
The validating webhook fails open (failurePolicy Ignore): every structural rule is in the schema and its CEL rules
(including the immutability rules), which the API server enforces whether or not the operator runs; it adds what
only a live view of the cluster can judge (does that PVC exist, does the PriorityClass, can the quota ever fit the
gang).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainingjob.api import constants as c

WEBHOOK_PORT = 9443  # where the operator's HTTPS webhook server listens by default
SERVICE_NAME = "trainingjob-operator"
SERVICE_NAMESPACE = "trainingjob-system"
SERVICE_PORT = 443  # the Service's `webhook` port, forwarded to WEBHOOK_PORT
CONVERT_PATH = "/convert"
MUTATE_PATH = "/mutate"
VALIDATE_PATH = "/validate"
HEALTH_PATH = "/healthz"
CONFIGURATION_NAME = "trainingjob-operator"  # both the Mutating- and the ValidatingWebhookConfiguration
MUTATING_WEBHOOK = f"default.{c.CRD_NAME}"
VALIDATING_WEBHOOK = f"validate.{c.CRD_NAME}"
# How long the API server waits for our answer: the admissionregistration default. A burst of a thousand creates on a
# busy two-core cluster made a SubjectAccessReview take over 3 s, and with 5 s in all every create of the burst was
# refused "could not check your permissions (retry)".
TIMEOUT_SECONDS = 10
LABELS = {"app.kubernetes.io/name": "trainingjob-operator"}


@dataclass(frozen=True)
class Endpoint:
    """Where the API server finds the webhook server: a base URL, or a Service (namespace, name, port)."""

    url: str | None = None
    service: tuple[str, str, int] | None = None

    def client_config(self, path: str, ca_bundle: str | None = None) -> dict[str, Any]:
        if self.url is not None:
            config: dict[str, Any] = {"url": self.url.rstrip("/") + path}
        elif self.service is not None:
            namespace, name, port = self.service
            config = {"service": {"namespace": namespace, "name": name, "path": path, "port": port}}
        else:
            raise ValueError("an endpoint needs a url or a service")
        if ca_bundle:
            config["caBundle"] = ca_bundle
        return config


def local_endpoint(port: int = WEBHOOK_PORT) -> Endpoint:
    return Endpoint(url=f"https://127.0.0.1:{port}")


def service_endpoint(namespace: str = SERVICE_NAMESPACE) -> Endpoint:
    return Endpoint(service=(namespace, SERVICE_NAME, SERVICE_PORT))


SHIPPED_ENDPOINT = local_endpoint()


def conversion(endpoint: Endpoint = SHIPPED_ENDPOINT, ca_bundle: str | None = None) -> dict[str, Any]:
    """The CRD's spec.conversion: every version converts through the operator's /convert."""
    return {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": endpoint.client_config(CONVERT_PATH, ca_bundle),
        },
    }


# CEL for the mutating webhook's matchConditions: every create; an update that changes the spec or the admission
# stamp (reconcile/admission.py: it is checked and signed there); a v1 request without an image.
IMAGE_UNSET = (
    f"request.resource.resource == '{c.PLURAL}' && request.kind.version == '{c.V1}' && "
    "(!has(object.spec) || (!has(object.spec.runtimeRef) && (!has(object.spec.image) || object.spec.image == '')))"
)


def _stamp(obj: str) -> str:
    """CEL: the admission stamp of `obj`, '' without one."""
    key = c.ADMISSION_ANNOTATION
    return (
        f"(has({obj}.metadata.annotations) && '{key}' in {obj}.metadata.annotations ? "
        f"{obj}.metadata.annotations['{key}'] : '')"
    )


SPEC_OR_STAMP_CHANGED = (
    f"request.operation == 'UPDATE' && (object.spec != oldObject.spec || {_stamp('object')} != {_stamp('oldObject')})"
)
MUTATE_WHEN = f"request.operation == 'CREATE' || ({SPEC_OR_STAMP_CHANGED}) || ({IMAGE_UNSET})"


def _rule(versions: list[str], resources: tuple[str, ...] = (c.PLURAL,)) -> dict[str, Any]:
    return {
        "apiGroups": [c.GROUP],
        "apiVersions": versions,
        "operations": ["CREATE", "UPDATE"],
        "resources": list(resources),
        "scope": "Namespaced",
    }


def _webhook(name: str, path: str, endpoint: Endpoint, ca_bundle: str | None, failure: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": failure,
        "timeoutSeconds": TIMEOUT_SECONDS,
        "matchPolicy": "Exact",
        "clientConfig": endpoint.client_config(path, ca_bundle),
    }


def _configuration(kind: str, webhook: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": CONFIGURATION_NAME, "labels": dict(LABELS)},
        "webhooks": [webhook],
    }


def mutating_configuration(endpoint: Endpoint = SHIPPED_ENDPOINT, ca_bundle: str | None = None) -> dict[str, Any]:
    """Defaults the schema cannot express (the operator's finalizer on a new job, in any version; a v1 job's image
    from its model), and the admission stamp: the author's permissions checked, then signed (webhooks/stamping.py).
    Called for creates, for updates of the spec or the stamp, and for v1 requests without an image: the operator's
    own writes (status, finalizers) never pay for a webhook call. Reinvoked if a later webhook changes the job, so
    the stamp is made over the spec as stored. TrainingSweeps too: their author is checked for the trials their
    template makes, and the sweep stamped (sweeps/admission.py)."""
    webhook = _webhook(MUTATING_WEBHOOK, MUTATE_PATH, endpoint, ca_bundle, "Fail")
    webhook["reinvocationPolicy"] = "IfNeeded"
    webhook["rules"] = [_rule(["*"], (c.PLURAL, c.SWEEP_PLURAL))]
    webhook["matchConditions"] = [{"name": "create-spec-stamp-or-image", "expression": MUTATE_WHEN}]
    return _configuration("MutatingWebhookConfiguration", webhook)


def validating_configuration(endpoint: Endpoint = SHIPPED_ENDPOINT, ca_bundle: str | None = None) -> dict[str, Any]:
    """Checks against the cluster's state, for every served version as it was sent (the webhook converts
    internally), and only when the spec is new or changed: the operator's own finalizer and status writes never
    call it."""
    webhook = _webhook(VALIDATING_WEBHOOK, VALIDATE_PATH, endpoint, ca_bundle, "Ignore")
    webhook["rules"] = [_rule(["*"])]
    webhook["matchConditions"] = [
        {"name": "spec-changed", "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec"}
    ]
    return _configuration("ValidatingWebhookConfiguration", webhook)
