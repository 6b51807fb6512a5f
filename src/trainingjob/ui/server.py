"""The aiohttp application of `tj ui`: static pages, SSE streams and the action endpoints.

Who may use it: whoever holds the token printed at start, because every request is made with the credentials of
the user who started `tj ui`: without the token, another local user (or a web page in the browser) could act as
them. The page keeps the token in its tab's sessionStorage and sends it as an Authorization header, never in a
cookie: cookies are not separated by port, so a cookie for 127.0.0.1 went to every other service on 127.0.0.1,
and a page on another local port used it to suspend a job as the UI's user (issue 41). Requests whose Host is not
the one the server listens on are refused (DNS rebinding), and changes need the X-TJ-UI header, which a
cross-site form cannot send.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.http_bodies import CallerGone, MalformedBody, parse_json, read_whole_body
from trainingjob.kube.meta import is_object_name
from trainingjob.ui import sse
from trainingjob.ui.kubeapi import InputError, KubeApi, error_payload, parse_manifest
from trainingjob.ui.queue import POSITIONS, PositionCache, queue_positions
from trainingjob.ui.store import JobStore
from trainingjob.ui.sweeps import add_routes as add_sweep_routes
from trainingjob.ui.watcher import JobWatcher, describe_error

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
VENDOR_FILES = ("vendor/chart.umd.min.js",)
COOKIE = "tj_ui_token"  # what earlier versions kept the token in: deleted wherever a browser still holds it
ACTION_HEADER = "X-TJ-UI"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
NAMED = ("namespace", "name", "pod")  # path parts that name objects: "..%2F..%2Fsecrets" arrives "../../secrets"

STORE = web.AppKey("store", JobStore)
KUBE = web.AppKey("kube", KubeApi)
SETTINGS = web.AppKey("settings", dict)


def missing_assets() -> list[str]:
    """Third-party browser files that `make ui-assets` copies from npm packages; the UI cannot run without them."""
    return [name for name in VENDOR_FILES if not (STATIC / name).is_file()]


def authorized(request: web.Request, token: str) -> bool:
    """The request carries the token in its Authorization header (a cookie does not count: see the docstring)."""
    offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
    return hmac.compare_digest(offered.encode(), token.encode())


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    if request.host not in settings["hosts"]:
        return web.json_response({"message": f"unexpected Host header {request.host!r}"}, status=421)
    if request.path.startswith("/api/"):
        if not authorized(request, settings["token"]):
            return web.json_response({"message": "open the URL `tj ui` printed (it carries the token)"}, status=401)
        if request.method not in ("GET", "HEAD") and request.headers.get(ACTION_HEADER) != "1":
            return web.json_response({"message": f"missing {ACTION_HEADER} header"}, status=403)
        for key in NAMED:
            value = request.match_info.get(key)
            if value is not None and not is_object_name(value):
                return web.json_response({"message": f"{value[:64]!r} is not a valid {key}"}, status=400)
    return await handler(request)


# On every answer, errors included (the 401, 404, 421 the guard and the router give; before, only what a handler
# returned had them): no framing by any page (clickjacking: another local port's page laying the UI's Delete under
# its own bait), no content sniffing, script only from the UI's own files.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'self'"
    ),
}


async def protect(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)


async def index(request: web.Request) -> web.StreamResponse:
    """The page. A login URL of earlier versions (`/?token=...`) is sent on to the fragment form the page reads
    (`/#token=...`: a fragment never leaves the browser), and the cookie they set is deleted."""
    token = request.query.get("token")
    if token is not None:
        response = web.HTTPFound("/#token=" + quote(token, safe=""))
        response.del_cookie(COOKIE, path="/")
        raise response
    response = web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})
    if COOKIE in request.cookies:
        response.del_cookie(COOKIE, path="/")
    return response


async def whoami(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    return web.json_response(
        {"user": settings["user"], "server": settings["server"], "namespace": settings["namespace"]}
    )


async def jobs_stream(request: web.Request) -> web.StreamResponse:
    store = request.app[STORE]
    response = await sse.open_stream(request)
    with store.subscribe() as subscriber, contextlib.suppress(ConnectionResetError):
        await sse.send(response, "watch", store.watch_state())
        await sse.send(response, "snapshot", store.snapshot())
        await sse.pump(response, subscriber)
    return response


EVENTS_RETRY_SECONDS = 10.0


async def forward_events(kube: KubeApi, namespace: str, name: str, subscriber: Any) -> None:
    """The job's Events for as long as its page is open: each watch ends on the server after a few minutes and
    is started again (a fresh list first; the page keys Events by uid, so repeats replace themselves). A refusal
    (401/403) is shown once and ends it; other errors are shown and retried."""
    while True:
        try:
            async for event in kube.events(namespace, name):
                subscriber.offer("event", event)
            await asyncio.sleep(1.0)  # the watch ended normally; never a hot loop if it ends at once
            continue
        except ApiException as error:
            subscriber.offer("events-error", error_payload(error)[1])
            if error.status in (401, 403):
                return
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as error:
            subscriber.offer("events-error", {"message": describe_error(error)})
        await asyncio.sleep(EVENTS_RETRY_SECONDS)


async def job_stream(request: web.Request) -> web.StreamResponse:
    """One job: the object on every change, its recorded progress points, and its Events as they happen."""
    store, kube = request.app[STORE], request.app[KUBE]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    response = await sse.open_stream(request)
    with store.subscribe((namespace, name)) as subscriber, contextlib.suppress(ConnectionResetError):
        job = store.jobs.get((namespace, name))
        if job is None:
            try:
                job = await kube.get(namespace, name)
            except ApiException as error:
                await sse.send(response, "missing", error_payload(error)[1])
                return response
            except (aiohttp.ClientError, TimeoutError, OSError) as error:
                await sse.send(
                    response, "missing", {"message": f"cannot reach the API server: {describe_error(error)}"}
                )
                return response
        await sse.send(response, "job", job)
        await sse.send(response, "history", store.history.points(job["metadata"].get("uid", "")))
        events = asyncio.create_task(forward_events(kube, namespace, name, subscriber))
        try:
            await sse.pump(response, subscriber)
        finally:
            events.cancel()
    return response


async def log_stream(request: web.Request) -> web.StreamResponse:
    kube = request.app[KUBE]
    namespace, pod = request.match_info["namespace"], request.match_info["pod"]
    follow = request.query.get("follow", "1") == "1"
    lines = request.query.get("tailLines", "")
    tail = int(lines) if lines.isascii() and lines.isdigit() else None  # "²".isdigit(), and int("²") raised: 500
    response = await sse.open_stream(request)
    with contextlib.suppress(ConnectionResetError):
        try:
            async for chunk in kube.log(namespace, pod, follow, tail):
                await sse.send(response, "chunk", chunk.decode("utf-8", "replace"))
            await sse.send(response, "end", {})
        except ApiException as error:
            await sse.send(response, "failure", error_payload(error)[1])
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            await sse.send(response, "failure", {"message": describe_error(error)})
    return response


async def act(call: Awaitable[dict[str, Any]]) -> web.Response:
    """Run one API call; answer with its object, or with the API server's error as it gave it."""
    try:
        return web.json_response(await call)
    except ApiException as error:
        status, payload = error_payload(error)
        return web.json_response(payload, status=status)
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        return web.json_response({"message": f"cannot reach the API server: {describe_error(error)}"}, status=502)


async def read_json(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; 400 with the reason otherwise (deep nesting made json.loads raise RecursionError,
    a 500). aiohttp refuses bodies past its client_max_size (1 MiB) with 413 before this reads them."""
    try:
        raw = await read_whole_body(request)
    except CallerGone:
        raise web.HTTPBadRequest(text='{"message": "the body ended early"}', content_type="application/json") from None
    try:
        body = parse_json(raw)
    except MalformedBody as error:
        message = json.dumps({"message": f"the body is not JSON we can read: {error}"[:512]})
        raise web.HTTPBadRequest(text=message, content_type="application/json") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text='{"message": "expected a JSON object"}', content_type="application/json")
    return body


async def create_job(request: web.Request) -> web.Response:
    body = await read_json(request)
    try:
        namespace, manifest = parse_manifest(str(body.get("manifest", "")), request.app[SETTINGS]["namespace"])
    except InputError as error:
        return web.json_response({"message": str(error)}, status=400)
    return await act(request.app[KUBE].create(namespace, manifest))


async def suspend_job(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body.get("suspend"), bool):
        return web.json_response({"message": "suspend must be true or false"}, status=400)
    info = request.match_info
    return await act(request.app[KUBE].set_suspend(info["namespace"], info["name"], body["suspend"]))


async def scale_job(request: web.Request) -> web.Response:
    body = await read_json(request)
    workers = body.get("workers")
    if not isinstance(workers, int) or isinstance(workers, bool):
        return web.json_response({"message": "workers must be an integer"}, status=400)
    info = request.match_info
    return await act(request.app[KUBE].scale(info["namespace"], info["name"], workers))


async def delete_job(request: web.Request) -> web.Response:
    info = request.match_info
    return await act(request.app[KUBE].delete(info["namespace"], info["name"]))


async def identity(api: client.ApiClient) -> str:
    """Who the API server says we are (SelfSubjectReview), shown in the page header; '' when it cannot say."""
    try:
        review = await client.AuthenticationV1Api(api).create_self_subject_review({})
        return review.status.user_info.username or ""
    except (ApiException, aiohttp.ClientError, TimeoutError, OSError, AttributeError) as error:
        log.info("cannot tell who we are: %s", describe_error(error))
        return ""


def build_app(api: client.ApiClient, settings: dict[str, Any], store: JobStore) -> web.Application:
    app = web.Application(middlewares=[guard])
    app.on_response_prepare.append(protect)
    app[STORE], app[KUBE], app[SETTINGS] = store, KubeApi(api), settings
    app[POSITIONS] = PositionCache(api, store)

    async def background(app: web.Application) -> AsyncIterator[None]:
        settings["user"] = await identity(api)
        watcher = JobWatcher(api, app[STORE], settings["namespaces"], settings["namespace"])
        task = asyncio.create_task(watcher.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(background)
    prefix = "/api/namespaces/{namespace}/trainingjobs/{name}"
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC, append_version=False)
    app.router.add_get("/api/whoami", whoami)
    app.router.add_get("/api/stream", jobs_stream)
    app.router.add_get("/api/queue-positions", queue_positions)
    app.router.add_post("/api/trainingjobs", create_job)
    app.router.add_get(prefix + "/stream", job_stream)
    app.router.add_post(prefix + "/suspend", suspend_job)
    app.router.add_post(prefix + "/scale", scale_job)
    app.router.add_delete(prefix, delete_job)
    app.router.add_get("/api/namespaces/{namespace}/pods/{pod}/log", log_stream)
    add_sweep_routes(app, api, store)
    return app
