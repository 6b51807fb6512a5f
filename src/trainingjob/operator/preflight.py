"""Checks `tj operator` makes before it starts watching: can it write where it must?

The operator keeps its Lease (leader election) and the progress endpoint's TLS Secret in its own namespace. A
cluster that has the CRD but not deploy/ (no `trainingjob-system`, no RBAC) would otherwise start, never become
leader and log a multi-line 404 every retry; this says what is missing in one line, and the process exits 1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.kube.backoff import doubling, jittered
from trainingjob.operator.runtime.leader import one_line

logger = logging.getLogger(__name__)
READY_TIMEOUT = 5.0  # one /readyz request
# 1 s doubling to 5 s: a starting replica notices the API server back within seconds; one small GET per 5 s is cheap.
READY_BACKOFF_MAX = 5.0
FORBIDDEN_GRACE = 30.0  # /readyz refused (401/403): an API server whose RBAC caches sync, or a cluster hiding it

SETUP_HINT = "apply deploy/ (kubectl apply -k deploy/), or run with --leader-election-namespace NS of an existing one"


class PreflightError(Exception):
    """What keeps the operator from running, in one line for people."""


def _message(error: ApiException) -> str:
    try:
        return str(json.loads(error.body).get("message") or error.reason)
    except (TypeError, ValueError):
        return str(error.reason)


def explain(error: ApiException, namespace: str, what: str) -> PreflightError | None:
    """The refusal of a dry-run create of `what` in the operator's namespace as a PreflightError (None: fine)."""
    if error.status == 404:
        return PreflightError(
            f"namespace {namespace} does not exist (the operator keeps its {what} there): {SETUP_HINT}"
        )
    if error.status == 403:
        return PreflightError(
            f"the operator may not create {what}s in namespace {namespace} ({_message(error)}): apply deploy/rbac"
        )
    if error.status == 409:
        return None  # it exists already: creating it is allowed, which is all we asked
    return PreflightError(f"cannot check namespace {namespace}: HTTP {error.status} {_message(error)}")


async def check_operator_namespace(
    api: client.ApiClient,
    namespace: str,
    lease_name: str | None,
    forbidden_grace: float = 0.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Dry-run creates (nothing is stored) of what the operator writes in its namespace; raises PreflightError.

    A dry run needs no permission beyond the create the operator needs anyway, and tells a missing namespace (404)
    from a missing RBAC (403), which reading would not. A 403 is asked again for `forbidden_grace`, which the caller
    gives only when the API server was not ready at first (wait_for_api_server waited): one that just started answers
    /readyz before its authorizer has every RoleBinding, and refused a restarted leader's Lease for that
    (test_leader_outage failed so under load). Against a ready API server, missing RBAC is one line at once.
    """
    began = clock()
    while True:
        try:
            await _dry_run(api, namespace, lease_name)
            return
        except ApiException as error:
            problem = explain(error, namespace, "Lease" if lease_name is not None else "Secret")
            if problem is None:
                return
            if error.status != 403 or clock() - began >= forbidden_grace:
                raise problem from None
            logger.warning("%s; asking again in 2s (the API server's RBAC may still be syncing)", problem)
            await sleep(2.0)


async def _dry_run(api: client.ApiClient, namespace: str, lease_name: str | None) -> None:
    if lease_name is not None:
        lease = client.V1Lease(metadata=client.V1ObjectMeta(name=lease_name))
        await client.CoordinationV1Api(api).create_namespaced_lease(namespace, lease, dry_run="All")
    else:
        secret = client.V1Secret(metadata=client.V1ObjectMeta(name="trainingjob-progress-tls"))
        await client.CoreV1Api(api).create_namespaced_secret(namespace, secret, dry_run="All")


def api_server_not_ready(error: BaseException) -> str | None:
    """Why the API server is not ready yet, from the failure of a request to its /readyz (None: not a sign of it)."""
    if isinstance(error, ApiException):
        return one_line(error) if error.status in (401, 403, 429) or error.status >= 500 else None
    if isinstance(error, TimeoutError):
        return f"no answer within {READY_TIMEOUT:.0f}s"
    if isinstance(error, (OSError, aiohttp.ClientError)):
        return str(error) or type(error).__name__
    return None


async def wait_for_api_server(
    api: client.ApiClient,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Return once the API server's /readyz answers 200 (True: it was not ready at the first ask), waiting out
    connection errors, timeouts, 429 and 5xx (1 s doubling to 5 s, ±20 %), one warning line each; 401 and 403 for
    FORBIDDEN_GRACE at most.

    A replica that lost its Lease in an API server outage exits, and the kubelet starts it again at once, while the
    API server is still down: without this wait its first request (the preflight) ended the new process with a
    traceback, and every further restart waited longer in CrashLoopBackOff (tests/integration/test_leader_outage.py).
    Just after the API server starts, it refuses everyone's requests with 403 until its RBAC caches sync, which the
    preflight read as a missing Role and exited 1; /readyz is readable by every authenticated user
    (system:public-info-viewer), so a 403 there means the same. A cluster that hides /readyz costs FORBIDDEN_GRACE,
    then the preflight's own request says what is missing.
    """
    failures, forbidden_since = 0, None
    while True:
        try:
            response = await api.call_api(
                "/readyz", "GET", auth_settings=["BearerToken"], _preload_content=False, _request_timeout=READY_TIMEOUT
            )
            await response.read()
            return failures > 0
        except Exception as error:
            problem = api_server_not_ready(error)
            if problem is None:
                return failures > 0
            if isinstance(error, ApiException) and error.status in (401, 403):
                forbidden_since = clock() if forbidden_since is None else forbidden_since
                if clock() - forbidden_since >= FORBIDDEN_GRACE:
                    return True
        failures += 1
        delay = jittered(doubling(1.0, READY_BACKOFF_MAX, failures))
        logger.warning("the API server is not ready (%s); retrying in %.1fs", problem, delay)
        await sleep(delay)
