"""Which gang APIs the cluster serves, from API discovery: read once when the operator starts.

Why once: the operator watches the gang objects of every API it found (with the same label selector as its other
children), and a watch set is fixed for a run; an API enabled later (a feature gate, Volcano installed) is used
after the operator restarts, which docs/trainingjob.md says. Discovery documents are readable by every
authenticated client (system:discovery), so this needs no RBAC of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from trainingjob.scheduling.gang import PROVIDERS, GangApi

logger = logging.getLogger(__name__)
REQUEST_TIMEOUT = 10
# GET a path, answer (HTTP status, parsed JSON body or None).
Fetch = Callable[[str], Awaitable[tuple[int, Any]]]


def served_resources(document: Mapping[str, Any] | None) -> set[str]:
    """Resource names of an APIResourceList (subresources such as `podgroups/status` left out)."""
    return {r.get("name", "") for r in (document or {}).get("resources") or [] if "/" not in r.get("name", "/")}


async def served_gang_apis(fetch: Fetch, apis: Iterable[GangApi] | None = None) -> frozenset[GangApi]:
    """The gang APIs whose group version lists their resource. A group version that is not served answers 404;
    any other failure is logged and counts as not served (the jobs then place their workers one by one, or wait
    Blocked when they name that provider)."""
    served: set[GangApi] = set()
    documents: dict[str, set[str] | None] = {}
    for api in apis if apis is not None else [p.api for p in PROVIDERS]:
        if api.api_version not in documents:
            documents[api.api_version] = await _resources(fetch, api.api_version)
        if api.plural in (documents[api.api_version] or set()):
            served.add(api)
    found = ", ".join(sorted(str(api) for api in served)) or "none"
    logger.info("gang scheduling APIs served by the cluster: %s", found)
    return frozenset(served)


async def _resources(fetch: Fetch, api_version: str) -> set[str] | None:
    try:
        status, document = await fetch(f"/apis/{api_version}")
    except Exception as error:  # discovery must never keep the operator from starting
        logger.warning("cannot read API discovery of %s: %r; its gang objects are not used", api_version, error)
        return None
    if status == 404:
        return None
    if document is None:
        logger.warning("API discovery of %s answered HTTP %s; its gang objects are not used", api_version, status)
        return None
    return served_resources(document)


def api_client_fetch(api: Any) -> Fetch:
    """A Fetch on a kubernetes_asyncio ApiClient (the client's models are not built: the answer is small JSON)."""

    async def fetch(path: str) -> tuple[int, Any]:
        response = await api.call_api(
            path,
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        data = await response.read()
        return response.status, (json.loads(data) if 200 <= response.status <= 299 else None)

    return fetch
