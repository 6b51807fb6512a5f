"""The mutating webhook fails closed (api/webhook_config.py): while no operator answers it, no TrainingJob or
TrainingSweep can be created. Tests that need one stored anyway (the schema probe before any operator runs, an
object stored unchecked as an older install or a hand-edited configuration would let through) withhold the
webhook's configuration for a moment and put it back as it was, its target and CA included."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kube import Kube, wait_until
from trainingjob.api import constants as k
from trainingjob.api import webhook_config as w

PROBE_NAMESPACE = "default"


def webhook_failed(error: ApiException) -> bool:
    """The API server could not call the mutating webhook (no operator answers)."""
    try:
        message = str(json.loads(error.body or "{}").get("message", ""))
    except ValueError:
        message = str(error.body)
    return error.status >= 500 and f'failed calling webhook "{w.MUTATING_WEBHOOK}"' in message


def _probe(kube: Kube) -> dict[str, Any] | None:
    """A dry-run create of a minimal v1 job (no conversion needed): the object, or None if the API server refused
    it for any reason but the webhook's absence (a schema being replaced, say)."""
    spec = {"framework": "pytorch", "image": "registry.example/probe:1", "command": ["true"]}
    probe = {"apiVersion": k.WATCHED_API_VERSION, "kind": k.KIND, "metadata": {"name": "webhook-probe"}, "spec": spec}
    try:
        return kube.custom.create_namespaced_custom_object(
            k.GROUP, k.V1, PROBE_NAMESPACE, k.PLURAL, probe, dry_run="All"
        )
    except ApiException as error:
        if webhook_failed(error):
            raise
        return None


def webhook_called(kube: Kube) -> bool:
    """Whether the API server calls the mutating webhook now: it failed, or it stamped the probe."""
    try:
        created = _probe(kube)
    except ApiException:
        return True
    return created is not None and k.ADMISSION_ANNOTATION in (created["metadata"].get("annotations") or {})


def webhook_unanswered(kube: Kube) -> bool:
    try:
        _probe(kube)
    except ApiException:
        return True
    return False


@contextlib.contextmanager
def mutating_webhook_withheld(kube: Kube) -> Iterator[None]:
    """The MutatingWebhookConfiguration deleted while the block runs (once the API server has stopped calling it),
    then created again as it was (once the API server calls it again). Nothing to do where it does not exist."""
    admission = client.AdmissionregistrationV1Api(kube.api)
    try:
        current = kube.api.sanitize_for_serialization(
            admission.read_mutating_webhook_configuration(w.CONFIGURATION_NAME)
        )
    except ApiException as error:
        if error.status != 404:
            raise
        yield
        return
    admission.delete_mutating_webhook_configuration(w.CONFIGURATION_NAME)
    try:
        wait_until(lambda: not webhook_unanswered(kube), 60, "the API server to stop calling the mutating webhook")
        yield
    finally:
        kept = {
            key: current["metadata"][key] for key in ("name", "labels", "annotations") if key in current["metadata"]
        }
        admission.create_mutating_webhook_configuration({**current, "metadata": kept})
        wait_until(lambda: webhook_called(kube), 60, "the API server to call the mutating webhook again")


@contextlib.contextmanager
def withheld_if_unanswered(kube: Kube) -> Iterator[None]:
    """mutating_webhook_withheld while no operator answers the webhook; nothing otherwise."""
    if webhook_unanswered(kube):
        with mutating_webhook_withheld(kube):
            yield
    else:
        yield
