"""How the one writer reads the API server's refusal of a child it creates (operator/runtime/writer.py): what the
user's spec caused ends the job as InvalidSpec (REJECTED), what may pass later is retried (DENIED), and a body the
API server cannot decode is the spec's fault, never retried (the fuzzing's quantities once looped here)."""

from __future__ import annotations

import json
import re

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api.schema_pod import QUANTITY
from trainingjob.operator.runtime.writer import Outcome, refused_creation


def refusal(status: int, message: str) -> ApiException:
    error = ApiException(status=status)
    error.body = json.dumps({"kind": "Status", "code": status, "message": message})
    return error


def test_a_body_the_api_server_cannot_decode_is_rejected_not_retried() -> None:
    message = 'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular expression'
    written = refused_creation(refusal(400, message), "Pod", "job-worker-0")
    assert written.outcome is Outcome.REJECTED and "cannot be handled as a Pod" in written.message


def test_a_webhooks_400_is_a_denial_that_may_pass_later() -> None:
    message = 'admission webhook "quota.example.com" denied the request: over budget'
    assert refused_creation(refusal(400, message), "Pod", "job-worker-0").outcome is Outcome.DENIED


def test_invalid_and_podsecurity_are_rejected_quota_is_denied() -> None:
    assert refused_creation(refusal(422, "spec.x: Invalid"), "Pod", "p").outcome is Outcome.REJECTED
    podsecurity = 'pods "p" is forbidden: violates PodSecurity "restricted:latest"'
    assert refused_creation(refusal(403, podsecurity), "Pod", "p").outcome is Outcome.REJECTED
    quota = 'pods "p" is forbidden: exceeded quota: gpus'
    assert refused_creation(refusal(403, quota), "Pod", "p").outcome is Outcome.DENIED


def test_the_schemas_quantity_takes_only_what_the_api_servers_parser_takes() -> None:
    # Refused by kube-apiserver 1.35 with 400 when the operator created a pod carrying them (decimal exponents, an
    # exponent past int64), or kept it computing for minutes (an exponent of 10^8).
    for refused in ("1e.5", "-34E.06", ".0589e+.0589", "1.7160e041.16", ".179E360669756970153119079", "1e99999999"):
        assert not re.match(QUANTITY, refused), refused
    # Taken by it (dry-run creates of a pod): suffixes, exponents, signs, a bare fraction.
    for taken in ("500m", "4Gi", "1e3", "1E+5", "1e-30", "+1", "1.", ".5Ei", "9" * 32, "1e999"):
        assert re.match(QUANTITY, taken), taken


def test_a_create_in_a_namespace_being_deleted_is_gone_not_a_denial_retried_with_a_traceback() -> None:
    """kube-apiserver's NamespaceLifecycle answer: the parent goes with its namespace, so there is nothing to retry
    (as a 403 it once read as an admission denial, and an LLMModel's reconcile logged tracebacks while its test
    namespace was deleted)."""
    error = ApiException(status=403)
    error.body = json.dumps(
        {
            "kind": "Status",
            "code": 403,
            "reason": "Forbidden",
            "message": 'services "m" is forbidden: unable to create new content in namespace t-1 because it is being '
            "terminated",
            "details": {"causes": [{"type": "NamespaceTerminating", "message": "namespace t-1 is being terminated"}]},
        }
    )
    assert refused_creation(error, "Service", "m").outcome is Outcome.GONE


def test_a_create_in_a_namespace_that_is_gone_is_gone_and_a_missing_object_is_not_mistaken_for_it() -> None:
    """Once the namespace is gone, NamespaceLifecycle answers 404 naming the namespace: the parent went with it (a
    fresh operator once reconciled a sweep's trials listed from a vanished namespace for minutes, logging an error
    for every create). A 404 about anything else on a create is not that, and still raises."""
    gone = ApiException(status=404)
    gone.body = json.dumps(
        {
            "kind": "Status",
            "code": 404,
            "reason": "NotFound",
            "message": 'namespaces "t-8e6b4285a3" not found',
            "details": {"name": "t-8e6b4285a3", "kind": "namespaces"},
        }
    )
    assert refused_creation(gone, "Pod", "trial-0-worker-0").outcome is Outcome.GONE
    other = ApiException(status=404)
    other.body = json.dumps({"kind": "Status", "code": 404, "details": {"name": "x", "kind": "leases"}})
    with pytest.raises(ApiException):
        refused_creation(other, "Pod", "trial-0-worker-0")
    garbled = ApiException(status=404)
    garbled.body = "<html>not found</html>"
    with pytest.raises(ApiException):
        refused_creation(garbled, "Pod", "trial-0-worker-0")
