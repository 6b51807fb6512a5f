"""Wait for a CustomResourceDefinition to be served, by watching it (by name) instead of listing its resource again.

An informer of a resource the cluster does not serve (Kueue not installed) got 404 and listed again with the
backoff, up to every 30 s, forever: three Kueue informers made about six LISTs a minute of nothing. With a gate, a
404 makes the informer wait on a watch of the one CRD that would serve it (field selector metadata.name=
<plural>.<group>): nothing is listed until the CRD is Established and serves the informer's version, then the
informer lists at once (no backoff to wait out).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from trainingjob.kube.reflector import ObjectKey, Reflector, Resource, Transport

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition")


def crd_name(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}"


def serves(crd: Mapping[str, Any], version: str) -> bool:
    """The CRD is Established and serves `version`."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    established = any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
    versions = (crd.get("spec") or {}).get("versions") or []
    return established and any(v.get("name") == version and v.get("served") for v in versions)


class Served:
    """A Reflector's sink that keeps only whether the watched CRD serves `version` (`ready`)."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.ready = asyncio.Event()
        self.first_listing: bool | None = None  # whether the first listing served the version

    def file(self, body: Mapping[str, Any]) -> bool:
        return serves(body, self.version)

    def replace(self, filed: dict[ObjectKey, Any]) -> None:
        if self.first_listing is None:
            self.first_listing = any(filed.values())
        self._set(any(filed.values()))

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        self._set(kind != "DELETED" and serves(body, self.version))

    def _set(self, ready: bool) -> None:
        if ready:
            self.ready.set()
        else:
            self.ready.clear()


def _raise(error: Exception, delay: float) -> None:
    raise error


async def wait_served(transport: Transport, resource: Resource) -> bool:
    """Until the CRD of `resource` serves it. True when it had to wait for a change; False when the CRD already
    served it at the first look (then the 404 that led here is something else, e.g. discovery not caught up: the
    caller backs off as before, so a CRD that is served yet answers 404 is never listed in a hot loop). Raises
    what the CRD's listing or watch was refused with (403: no grant to watch CRDs)."""
    sink = Served(resource.version)
    name = crd_name(resource)
    reflector = Reflector(transport, CRDS.path(None), sink, f"CRD {name}", field_selector=f"metadata.name={name}",
                          on_failure=_raise)  # fmt: skip
    watching = asyncio.create_task(reflector.run(), name=f"CRD {name}")
    try:
        await _until(sink.ready, watching)
        return not sink.first_listing
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watching


async def _until(event: asyncio.Event, watching: asyncio.Task) -> None:
    """Until `event` is set; raises what ended `watching` if it ends first."""
    awaited = asyncio.create_task(event.wait())
    try:
        await asyncio.wait({awaited, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        awaited.cancel()
    if not event.is_set():
        watching.result()
