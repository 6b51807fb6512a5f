"""How the job commands' failures read: API errors and unreachable clusters, each turned into a one-line
CliError (pure; cli/kube.py raises them)."""

from __future__ import annotations

import errno

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.cli.common import CliError, job_ref
from trainingjob.kube.status import api_message, status_body

CRD_MISSING = "the TrainingJob CRD is not installed in this cluster; apply deploy/crd/"


def map_api_error(
    error: ApiException, *, namespace: str | None = None, name: str | None = None, resource: str = k.PLURAL
) -> CliError:
    """One line for an API error on `resource` (a plural, e.g. trainingjobs or pods) named `name` in `namespace`,
    carrying the API server's status, reason and message as they came."""
    line = _api_error_line(error, namespace, name, resource)
    reason = str(status_body(error).get("reason") or error.reason or "")
    return CliError(line, status=error.status, reason=reason, api_message=api_message(error))


def _api_error_line(error: ApiException, namespace: str | None, name: str | None, resource: str) -> str:
    status = status_body(error)
    details = status.get("details") or {}
    singular = k.SINGULAR if resource == k.PLURAL else resource.removesuffix("s")
    if error.status == 404:
        if details.get("kind") == "namespaces":
            return f"namespace {details.get('name') or namespace} not found"
        if details.get("name"):
            return f"{singular} {job_ref(namespace, details['name'])} not found"
        if resource == k.PLURAL:
            # "404 page not found" (no such API group) or a Status without details (no such resource in the group).
            return CRD_MISSING
        return f"{singular} {job_ref(namespace, name or '')} not found: {api_message(error)}"
    if error.status == 409 and status.get("reason") == "AlreadyExists":
        return f"{singular} {job_ref(namespace, details.get('name') or name or '')} already exists"
    if error.status == 422:
        return f"invalid {singular} {job_ref(namespace, name or '')}: {api_message(error)}"
    if error.status == 401:
        return f"unauthorized: the API server rejected the kubeconfig's credentials ({api_message(error)})"
    if error.status == 403:
        return f"forbidden: {api_message(error)}"
    return f"the API server answered {error.status}: {api_message(error)}"


def map_log_error(error: ApiException, namespace: str, pod: str) -> CliError:
    """Why the log of `pod` cannot be shown. The API server fetches logs from the node's kubelet; on the local
    cluster kwok plays the kubelet of the fake nodes and serves none, so the request fails with 500 (connection
    refused); local process nodes serve real logs."""
    if error.status in (401, 403):
        return map_api_error(error, namespace=namespace, name=pod, resource="pods")
    if error.status == 404 and (status_body(error).get("details") or {}).get("kind") == "pods":
        line = f"pod {namespace}/{pod} not found (the worker may have been replaced; try again)"
    else:
        line = (
            f"pod {namespace}/{pod} has no logs available (container {k.TRAINER_CONTAINER}): the API server could not "
            f"get them from the node: {api_message(error)}"
        )
    return CliError(line, status=error.status, reason=str(error.reason or ""), api_message=api_message(error))


def map_connection_error(error: BaseException, server: str) -> CliError:
    """One line for a request that never got an answer from `server`."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        reason = f"TLS certificate verification failed ({error.certificate_error})"
    elif isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        if os_error.errno == errno.ECONNREFUSED or isinstance(os_error, ConnectionRefusedError):
            reason = "connection refused"
        elif isinstance(os_error, TimeoutError):
            reason = "connection timed out"
        else:
            reason = os_error.strerror or str(os_error) or type(os_error).__name__
    elif isinstance(error, TimeoutError):
        reason = "timed out waiting for an answer"
    elif isinstance(error, ConnectionRefusedError):
        reason = "connection refused"
    else:
        reason = str(error) or type(error).__name__
    return CliError(f"cannot reach the Kubernetes API at {server}: {reason}")
