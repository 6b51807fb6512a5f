"""The UI's TrainingSweep endpoints: the sweeps the user may list, and one sweep, read with the user's credentials.

Read when a page asks (the sweep pages refresh every few seconds) rather than mirrored by a second watch: a sweep's
status changes once per trial state change, and a handful of sweeps are open at a time, so a GET per refresh costs
less than keeping every sweep of the cluster in memory for the lifetime of `tj ui`. Everything in a sweep (names,
parameter values, reasons, messages) was written by users or trials: the page renders it as text only.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.sweep_phases import SweepPhase
from trainingjob.ui.kubeapi import error_payload
from trainingjob.ui.store import JobStore
from trainingjob.ui.watcher import describe_error

TIMEOUT = aiohttp.ClientTimeout(sock_connect=10, sock_read=60)


def sweep_summary(sweep: dict[str, Any]) -> dict[str, Any]:
    """What the sweep list shows of a sweep (pure)."""
    metadata, spec, status = sweep.get("metadata") or {}, sweep.get("spec") or {}, sweep.get("status") or {}
    objective, best = spec.get("objective") or {}, status.get("bestTrial") or {}
    return {
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name"),
        "created": metadata.get("creationTimestamp"),
        "phase": status.get("phase") or SweepPhase.PENDING.value,
        "metric": objective.get("metric"),
        "direction": objective.get("direction") or "maximize",
        "maxTrials": spec.get("maxTrials"),
        "done": status.get("trialsDone", 0),
        "running": status.get("trialsRunning", 0),
        "pruned": status.get("trialsPruned", 0),
        "failed": status.get("trialsFailed", 0),
        "best": {key: best.get(key) for key in ("name", "index", "value")} if best else None,
    }


async def _answer(call: Any, shape: Any) -> web.Response:
    try:
        return web.json_response(shape(await call))
    except ApiException as error:
        status, payload = error_payload(error)
        return web.json_response(payload, status=status)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        return web.json_response({"message": f"cannot reach the API server: {describe_error(error)}"}, status=502)


class SweepApi:
    """The two reads behind the sweep pages, scoped like the job list (store.scope: None for every namespace)."""

    def __init__(self, api: client.ApiClient, store: JobStore) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.store = store

    async def listing(self) -> list[dict[str, Any]]:
        arguments = {"_request_timeout": TIMEOUT}
        if self.store.scope is None:
            found = await self.custom.list_cluster_custom_object(k.GROUP, k.SWEEP_VERSION, k.SWEEP_PLURAL, **arguments)
            items = found.get("items") or []
        else:
            items = []
            for namespace in self.store.scope:
                found = await self.custom.list_namespaced_custom_object(
                    k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, **arguments
                )
                items += found.get("items") or []
        return sorted((sweep_summary(item) for item in items), key=lambda s: (s["namespace"] or "", s["name"] or ""))

    async def one(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.custom.get_namespaced_custom_object(
            k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, name, _request_timeout=TIMEOUT
        )


SWEEPS = web.AppKey("sweeps", SweepApi)


async def list_sweeps(request: web.Request) -> web.Response:
    return await _answer(request.app[SWEEPS].listing(), lambda rows: rows)


async def get_sweep(request: web.Request) -> web.Response:
    info = request.match_info
    return await _answer(request.app[SWEEPS].one(info["namespace"], info["name"]), lambda sweep: sweep)


def add_routes(app: web.Application, api: client.ApiClient, store: JobStore) -> None:
    app[SWEEPS] = SweepApi(api, store)
    app.router.add_get("/api/trainingsweeps", list_sweeps)
    app.router.add_get("/api/namespaces/{namespace}/trainingsweeps/{name}", get_sweep)
