"""Keep the CRD's conversion webhook and the admission webhook configurations pointed at a live operator, carrying
the CA that signs its certificate.

Only clientConfig is touched (the rest of each object is what deploy/crd/ ships), with resourceVersion
preconditions, and only when it differs from what it should be:
- in the cluster, every replica serves behind the operator's Service, so the target is always that Service;
- outside it (`tj operator` on a developer machine), the target is this process's URL unless the current target is
  another URL where a live operator of this cluster answers (its certificate verifies against our CA). So one
  operator, or several, restarted in any order, leave the API server pointed at one that runs, and two live ones
  never take the webhooks from each other.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as c
from trainingjob.api import webhook_config as w

logger = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
Probe = Callable[[str], Awaitable[bool]]
REQUEST_TIMEOUT = 10


def base_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_target(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether two clientConfigs reach the same server (caBundle aside)."""
    if "url" in desired:
        return "url" in current and base_url(current["url"]) == base_url(desired["url"])
    return current.get("service") == desired.get("service")


def with_nulls(config: Mapping[str, Any]) -> dict[str, Any]:
    """A clientConfig as a patch: the alternative it does not use is removed (url and service are exclusive)."""
    patch = dict(config)
    patch.setdefault("url", None)
    patch.setdefault("service", None)
    return patch


@dataclass(frozen=True)
class Target:
    """One clientConfig the operator keeps: where it lives and how to patch it."""

    kind: str  # crd | mutating | validating
    path: str  # the webhook path on our server

    def client_config(self, document: Mapping[str, Any]) -> dict[str, Any]:
        if self.kind == "crd":
            conversion = (document.get("spec") or {}).get("conversion") or {}
            return dict((conversion.get("webhook") or {}).get("clientConfig") or {})
        webhooks = document.get("webhooks") or []
        return dict(webhooks[0].get("clientConfig") or {}) if webhooks else {}

    def patch(self, document: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        metadata = {"resourceVersion": document["metadata"]["resourceVersion"]}
        if self.kind == "crd":
            webhook = {"conversionReviewVersions": ["v1"], "clientConfig": with_nulls(config)}
            return {"metadata": metadata, "spec": {"conversion": {"strategy": "Webhook", "webhook": webhook}}}
        name = w.MUTATING_WEBHOOK if self.kind == "mutating" else w.VALIDATING_WEBHOOK
        return {"metadata": metadata, "webhooks": [{"name": name, "clientConfig": with_nulls(config)}]}


TARGETS = (Target("crd", w.CONVERT_PATH), Target("mutating", w.MUTATE_PATH), Target("validating", w.VALIDATE_PATH))


class Registration:
    def __init__(
        self,
        api: client.ApiClient,
        endpoint: w.Endpoint,
        in_cluster: bool,
        probe_for: Callable[[str], Probe] | None = None,
    ) -> None:
        self.api = api
        self.endpoint = endpoint
        self.in_cluster = in_cluster
        self.probe_for = probe_for or tls_probe  # bundle -> probe that trusts only that bundle
        self.missing_reported: set[str] = set()
        # Other live operators the last ensure() left the webhooks with (outside the cluster): nothing in the API
        # changes when one stops, so the upkeep probes them (deferred_alive) to take over once one is gone.
        self.deferred_to: set[str] = set()

    async def _read(self, target: Target) -> dict[str, Any] | None:
        options = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        if target.kind == "crd":
            return await answer(
                client.ApiextensionsV1Api(self.api).read_custom_resource_definition(c.CRD_NAME, **options)
            )
        admission = client.AdmissionregistrationV1Api(self.api)
        if target.kind == "mutating":
            return await answer(admission.read_mutating_webhook_configuration(w.CONFIGURATION_NAME, **options))
        return await answer(admission.read_validating_webhook_configuration(w.CONFIGURATION_NAME, **options))

    async def _patch(self, target: Target, body: dict[str, Any]) -> None:
        options = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
        if target.kind == "crd":
            extensions = client.ApiextensionsV1Api(self.api)
            await answer(
                extensions.patch_custom_resource_definition(c.CRD_NAME, body, _content_type=MERGE_PATCH, **options)
            )
            return
        admission = client.AdmissionregistrationV1Api(self.api)
        patch = (
            admission.patch_mutating_webhook_configuration
            if target.kind == "mutating"
            else admission.patch_validating_webhook_configuration
        )
        await answer(patch(w.CONFIGURATION_NAME, body, _content_type=STRATEGIC_MERGE_PATCH, **options))

    async def desired(self, current: Mapping[str, Any], path: str, bundle: str, live: dict[str, bool]) -> dict:
        mine = self.endpoint.client_config(path, bundle)
        if self.in_cluster or same_target(current, mine) or "url" not in current:
            return mine
        other = base_url(current["url"])
        if other not in live:
            live[other] = await self.probe_for(base64.b64decode(bundle).decode())(other)
        if not live[other]:
            return mine
        self.deferred_to.add(other)
        return {"url": current["url"], "caBundle": bundle}

    async def deferred_alive(self, bundle_pem: str) -> bool:
        """Whether every other operator the webhooks were left with still answers (a probe of its /healthz that
        trusts only our CA: no request to the API server)."""
        probe = self.probe_for(bundle_pem)
        return all([await probe(other) for other in sorted(self.deferred_to)])

    async def ensure(self, bundle_pem: str) -> bool:
        """Point every object at a live operator with our bundle; True when all of them already were so (or now
        are, after our patches), i.e. the API server trusts the bundle."""
        bundle = base64.b64encode(bundle_pem.encode()).decode()
        live: dict[str, bool] = {}
        in_place = True
        self.deferred_to = set()
        for target in TARGETS:
            document = await self._read(target)
            if document is None:
                if target.kind not in self.missing_reported:
                    logger.warning("%s is not registered: apply deploy/crd/ to enable it", target.kind)
                    self.missing_reported.add(target.kind)
                in_place = in_place and target.kind != "crd"
                continue
            current = target.client_config(document)
            wanted = await self.desired(current, target.path, bundle, live)
            if current == wanted:
                continue
            try:
                await self._patch(target, target.patch(document, wanted))
            except ApiException as error:
                if error.status != 409:
                    raise
                in_place = False  # someone else wrote meanwhile: look again next time
                continue
            where = wanted.get("url") or (wanted.get("service") or {}).get("name")
            logger.info("pointed the %s webhook at %s", target.kind, where)
            in_place = False  # the API server picks the change up asynchronously
        return in_place


async def answer(call: Awaitable[Any]) -> dict[str, Any] | None:
    """The JSON of a kubernetes_asyncio call made with _preload_content=False, as plain dicts in the API's own field
    names (the client's models rename them); None on 404, ApiException on any other failure."""
    response = await call
    data = await response.read()
    if response.status == 404:
        return None
    if not 200 <= response.status <= 299:
        try:
            reason = json.loads(data).get("message", "")
        except ValueError:
            reason = data.decode(errors="replace")[:300]
        raise ApiException(status=response.status, reason=reason)
    return json.loads(data)


def tls_probe(bundle_pem: str, timeout: float = 2.0) -> Probe:
    """A probe that asks `<base>/healthz` and trusts only our CA bundle: a server of another cluster, or no server,
    is not alive for us."""
    context = ssl.create_default_context(cadata=bundle_pem)

    async def probe(base: str) -> bool:
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
                session.get(base + w.HEALTH_PATH, ssl=context) as response,
            ):
                return response.status == 200
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    return probe
