"""Checks `tj operator` makes before it starts watching: can it write where it must?

The operator keeps its Lease (leader election) and the progress endpoint's TLS Secret in its own namespace. A
cluster that has the CRD but not deploy/ (no `trainingjob-system`, no RBAC) would otherwise start, never become
leader and log a multi-line 404 every retry; this says what is missing in one line, and the process exits 1.
"""

from __future__ import annotations

import json

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

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


async def check_operator_namespace(api: client.ApiClient, namespace: str, lease_name: str | None) -> None:
    """Dry-run creates (nothing is stored) of what the operator writes in its namespace; raises PreflightError.

    A dry run needs no permission beyond the create the operator needs anyway, and tells a missing namespace (404)
    from a missing RBAC (403), which reading would not.
    """
    try:
        if lease_name is not None:
            lease = client.V1Lease(metadata=client.V1ObjectMeta(name=lease_name))
            await client.CoordinationV1Api(api).create_namespaced_lease(namespace, lease, dry_run="All")
        else:
            secret = client.V1Secret(metadata=client.V1ObjectMeta(name="trainingjob-progress-tls"))
            await client.CoreV1Api(api).create_namespaced_secret(namespace, secret, dry_run="All")
    except ApiException as error:
        problem = explain(error, namespace, "Lease" if lease_name is not None else "Secret")
        if problem is not None:
            raise problem from None
