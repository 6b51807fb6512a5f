"""The API calls behind the UI's actions and streams, made with the user's credentials.

Failures are passed on as the API server gave them: its HTTP status, its reason and its Status message verbatim
(`error_payload`), so the page shows the same words `kubectl` would, e.g. an RBAC denial naming the user and verb.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.kube.reflector import lines
from trainingjob.kube.status import event_time, raise_for_status
from trainingjob.kube.yaml_text import yaml_problem
from trainingjob.ui.watcher import WATCH_SECONDS

TIMEOUT = aiohttp.ClientTimeout(sock_connect=10, sock_read=60)
MERGE_PATCH = "application/merge-patch+json"


class InputError(ValueError):
    """What the user typed cannot be sent at all (not YAML, not one TrainingJob); never an API answer."""


def error_payload(error: ApiException) -> tuple[int, dict[str, Any]]:
    """(HTTP status, {status, reason, message}) with the API server's own message, untouched."""
    body = error.body.decode("utf-8", "replace") if isinstance(error.body, bytes) else (error.body or "")
    message, reason = body.strip(), error.reason or ""
    try:
        document = json.loads(body) if body else {}
    except ValueError:
        document = {}
    if isinstance(document, dict) and document.get("kind") == "Status":
        message = document.get("message") or message
        reason = document.get("reason") or reason
    status = error.status if isinstance(error.status, int) and 400 <= error.status <= 599 else 502
    return status, {"status": error.status, "reason": reason, "message": message or f"HTTP {error.status}"}


def parse_manifest(text: str, default_namespace: str) -> tuple[str, dict[str, Any]]:
    """(namespace, manifest) of the one TrainingJob in `text` (YAML or JSON)."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise InputError(f"not valid YAML: {yaml_problem(error)}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise InputError(f"expected one TrainingJob object, found {len(documents)} document(s)")
    manifest = documents[0]
    if manifest.get("kind") != k.KIND or manifest.get("apiVersion", "").split("/")[0] != k.GROUP:
        found = f"{manifest.get('kind')} {manifest.get('apiVersion')}"
        raise InputError(f"expected kind {k.KIND} of {k.GROUP}, found {found}")
    metadata = manifest.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise InputError("metadata must be an object")
    namespace = metadata.get("namespace") or default_namespace
    metadata["namespace"] = namespace
    return namespace, manifest


class KubeApi:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    async def create(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        version = manifest["apiVersion"].split("/")[-1]
        return await self.custom.create_namespaced_custom_object(
            k.GROUP, version, namespace, k.PLURAL, manifest, _request_timeout=TIMEOUT
        )

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.custom.get_namespaced_custom_object(
            k.GROUP, k.VERSION, namespace, k.PLURAL, name, _request_timeout=TIMEOUT
        )

    async def set_suspend(self, namespace: str, name: str, suspend: bool) -> dict[str, Any]:
        return await self.custom.patch_namespaced_custom_object(
            k.GROUP, k.VERSION, namespace, k.PLURAL, name, {"spec": {"suspend": suspend}},
            _content_type=MERGE_PATCH, _request_timeout=TIMEOUT,
        )  # fmt: skip

    async def scale(self, namespace: str, name: str, workers: int) -> dict[str, Any]:
        """Through the scale subresource, as `kubectl scale` does (RBAC: trainingjobs/scale)."""
        return await self.custom.patch_namespaced_custom_object_scale(
            k.GROUP, k.VERSION, namespace, k.PLURAL, name, {"spec": {"replicas": workers}},
            _content_type=MERGE_PATCH, _request_timeout=TIMEOUT,
        )  # fmt: skip

    async def delete(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.custom.delete_namespaced_custom_object(
            k.GROUP, k.VERSION, namespace, k.PLURAL, name, _request_timeout=TIMEOUT
        )

    async def events(self, namespace: str, name: str) -> AsyncIterator[dict[str, Any]]:
        """The job's Events, oldest first, then every new or updated one as the API server sends it (until the
        watch ends; the browser reconnects)."""
        selector = f"involvedObject.name={name},involvedObject.kind={k.KIND}"
        listing = await self.core.list_namespaced_event(namespace, field_selector=selector, _request_timeout=TIMEOUT)
        for event in sorted((self.api.sanitize_for_serialization(e) for e in listing.items), key=event_time):
            yield event
        response = await self.core.list_namespaced_event(
            namespace,
            field_selector=selector,
            watch=True,
            resource_version=listing.metadata.resource_version,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=WATCH_SECONDS + 60),
        )
        try:
            await raise_for_status(response)
            async for line in lines(response.content):
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    yield event.get("object") or {}
        finally:
            response.release()

    async def log(self, namespace: str, pod: str, follow: bool, tail_lines: int | None) -> AsyncIterator[bytes]:
        """The trainer container's log through the API server (which gets it from the node), chunk by chunk."""
        arguments: dict[str, Any] = {"container": k.TRAINER_CONTAINER, "follow": follow, "_preload_content": False}
        if tail_lines is not None:
            arguments["tail_lines"] = tail_lines
        arguments["_request_timeout"] = aiohttp.ClientTimeout(sock_connect=10, sock_read=None if follow else 60)
        response = await self.core.read_namespaced_pod_log(pod, namespace, **arguments)
        try:
            await raise_for_status(response)
            while chunk := await response.content.readany():
                yield chunk
        finally:
            response.release()
