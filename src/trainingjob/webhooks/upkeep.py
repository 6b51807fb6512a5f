"""What wakes the webhooks' upkeep (component.py): a watch of each object it keeps, by name.

The upkeep once read the TLS Secret, the CRD and both webhook configurations every 5 s (30 s in the cluster) to
notice a re-applied deploy/crd/ or another replica's rotation: about 50 reads a minute of objects that almost never
change. Now one watch per object (a field selector on metadata.name, the kit's Reflector: it resumes from the last
resourceVersion and lists again after 410, so no change is missed) sets `changed`, and the upkeep reads only then;
an overwritten caBundle is put back as soon as the watch tells. No periodic re-read is kept: the watches cannot miss
a change, and what changes with time alone (certificate renewal) is computed (tls.next_change).

A watch the API server refuses (403: RBAC from before these watches, which grants get and patch only) is not retried
in a hot loop: `refused` names it and the upkeep falls back to looking every `fallback` seconds, as it did before.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w
from trainingjob.kube.reflector import ApiClientTransport, ObjectKey, Reflector, Resource, describe
from trainingjob.webhooks.tls import SECRET_NAME

logger = logging.getLogger(__name__)
SECRETS = Resource("", "v1", "secrets", "Secret")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")
MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
# Every resource the upkeep watches (tests/rbac_usage.py grants list and watch on them, by name).
WATCHED = (SECRETS, CRDS, MUTATING, VALIDATING)


@dataclass(frozen=True)
class Named:
    """One object the upkeep keeps: its resource, name and (for the Secret) namespace."""

    resource: Resource
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.resource.plural} {where}{self.name}"


def kept_objects(namespace: str) -> tuple[Named, ...]:
    return (
        Named(SECRETS, SECRET_NAME, namespace),
        Named(CRDS, c.CRD_NAME),
        Named(MUTATING, w.CONFIGURATION_NAME),
        Named(VALIDATING, w.CONFIGURATION_NAME),
    )


class Nudge:
    """A Reflector's sink that keeps nothing but says that something changed: every watch event, and a listing
    whose resourceVersions differ from the last one (the first listing counts: a change between the upkeep's first
    check and the watch's start would otherwise go unseen)."""

    def __init__(self, changed: asyncio.Event, listed: Callable[[], None] = lambda: None) -> None:
        self.changed = changed
        self.listed = listed  # hears of every successful listing
        self.seen: dict[ObjectKey, str] | None = None

    def file(self, body: Mapping[str, Any]) -> str:
        return str((body.get("metadata") or {}).get("resourceVersion") or "")

    def replace(self, filed: dict[ObjectKey, Any]) -> None:
        self.listed()
        if filed != self.seen:
            self.seen = dict(filed)
            self.changed.set()

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        self.changed.set()


class ObjectWatches:
    """One Reflector per kept object, all setting one `changed` event."""

    def __init__(self, watch_api: object, objects: tuple[Named, ...]) -> None:
        self.changed = asyncio.Event()
        self.refused: set[str] = set()
        transport = ApiClientTransport(watch_api)
        self.reflectors = [
            Reflector(
                transport,
                named.resource.path(named.namespace),
                Nudge(self.changed, functools.partial(self.refused.discard, str(named))),
                str(named),
                field_selector=f"metadata.name={named.name}",
                on_failure=self._failed(str(named)),
            )
            for named in objects
        ]
        self.tasks: list[asyncio.Task] = []

    def _failed(self, name: str) -> Any:
        def on_failure(error: Exception, delay: float) -> None:
            if isinstance(error, ApiException) and error.status == 403:
                if name not in self.refused:
                    logger.warning("cannot watch %s (%s): looking at it now and then instead", name, describe(error))
                self.refused.add(name)
                return
            logger.warning("watch of %s: %s; retrying in %.1fs", name, describe(error), delay)

        return on_failure

    def start(self) -> None:
        self.tasks = [asyncio.create_task(r.run(), name=f"webhook watch {r.name}") for r in self.reflectors]

    async def wait(self, seconds: float) -> bool:
        """Until a kept object changes (True) or `seconds` pass (False). The event is cleared on waking, before the
        upkeep reads: a change meanwhile wakes it again."""
        try:
            await asyncio.wait_for(self.changed.wait(), max(seconds, 0.0))
        except TimeoutError:
            return False
        self.changed.clear()
        return True

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
