"""The writer's low-level calls (runtime/writer.py): writes whose answers are never read, Events on our objects, and
how a terminating namespace refuses content."""

from __future__ import annotations

import datetime
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.client.rest import RESTResponse

from trainingjob.api import constants as k
from trainingjob.api.times import format_time
from trainingjob.planning.actions import Event

logger = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"


async def record_event(core: client.CoreV1Api, involved: tuple[str, str, str, str, str], event: Event) -> None:
    """A core/v1 Event on an object of ours, given as (apiVersion, kind, namespace, name, uid); losing one must not
    fail a reconcile, so a refusal is only logged."""
    api_version, kind, namespace, name, uid = involved
    now = format_time(datetime.datetime.now(datetime.UTC))
    manifest = {
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace, "uid": uid},
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:1024],
        "source": {"component": k.MANAGED_BY},
        "reportingComponent": k.MANAGED_BY,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        await unread(core.create_namespaced_event, namespace, manifest)
    except ApiException as error:
        # A namespace being deleted refuses new content; its jobs go with it, so that refusal is nothing to warn of.
        level = logging.DEBUG if namespace_refuses_content(error) else logging.WARNING
        message = "could not record event %s on %s %s/%s: %s"
        logger.log(level, message, event.reason, kind, namespace, name, error.reason)


def namespace_refuses_content(error: ApiException) -> bool:
    """The API server's NamespaceLifecycle refusal of new content: 403 with cause NamespaceTerminating while the
    namespace is being deleted, 404 naming the namespace (not the object) once it is gone. Either way the parent goes
    with its namespace: a fresh operator listed it from a namespace that vanished under it (seen in CI: a sweep's
    trials reconciled for minutes, every create answered `namespaces "t-…" not found`)."""
    if error.status == 403:
        return "NamespaceTerminating" in str(error.body or "")
    if error.status != 404:
        return False
    try:
        details = json.loads(error.body or "{}").get("details") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(details, dict) and details.get("kind") == "namespaces"


async def unread(call: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> None:
    """Make a core/v1 write whose answer we never read, without turning that answer into model objects.

    kubernetes_asyncio deserializes every response into generated classes; for the pods, services and events we
    create by the thousand that was 6 % of the operator's CPU. Errors still raise ApiException as usual.
    """
    response = await call(*args, _preload_content=False, **kwargs)
    data = await response.read()
    if not 200 <= response.status <= 299:
        raise ApiException(http_resp=RESTResponse(response, data))
