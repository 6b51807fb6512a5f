"""TrainingJobs, listed and watched with the user's credentials into the JobStore for as long as the UI runs, through
the shared watch loop (kube/reflector.py): one reflector per namespace of the scope, or one for all of them.

Scope: every namespace when the user may list them all, else the namespaces given (or the kubeconfig context's),
so a user with rights in one namespace sees that namespace rather than an error. Watches resume from the last
resourceVersion (bookmarks included); an expired version (410) or any error leads to a fresh LIST that is diffed
against the store, after a backoff, with the reason shown in the UI meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.kube.reflector import ApiClientTransport, ObjectKey, Reflector, Resource
from trainingjob.kube.status import api_message
from trainingjob.ui.store import JobStore

log = logging.getLogger(__name__)
WATCH_SECONDS = 290
JOBS = Resource(k.GROUP, k.VERSION, k.PLURAL, k.KIND)


class AllNamespacesForbidden(Exception):
    """Listing TrainingJobs in every namespace is forbidden: the scope shrinks to the fallback namespace."""


def describe_error(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason or ''}: {api_message(error)}".strip()
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def watch_all(watches: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the watches of a scope together; the first to fail stops the others and its error is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            for watch in watches:
                group.create_task(watch)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None


class NamespaceMirror:
    """The reflector's sink for one namespace of the scope (None: all of them) and what went wrong last there."""

    def __init__(self, watcher: JobWatcher, namespace: str | None, scope: list[str] | None) -> None:
        self.watcher, self.namespace, self.scope = watcher, namespace, scope

    def file(self, body: Any) -> dict[str, Any]:
        return body

    def replace(self, filed: dict[ObjectKey, dict[str, Any]]) -> None:
        self.watcher.store.replace_all(list(filed.values()), self.scope, self.namespace)
        self.watcher.problem(self.namespace, None)

    def apply(self, kind: str, body: Any) -> None:
        if kind == "DELETED":
            self.watcher.store.delete(body)
        else:
            self.watcher.store.upsert(body)


class JobWatcher:
    def __init__(self, api: client.ApiClient, store: JobStore, namespaces: list[str] | None, fallback: str) -> None:
        self.transport = ApiClientTransport(api)
        self.store = store
        self.requested = namespaces  # None: all namespaces, falling back to `fallback` when that is forbidden
        self.fallback = fallback
        self.problems: dict[str | None, str] = {}

    async def run(self) -> None:
        scope = self.requested
        while True:
            try:
                await watch_all(self._reflector(namespace, scope).run() for namespace in scope or [None])
            except AllNamespacesForbidden:
                log.info("listing TrainingJobs in all namespaces is forbidden; watching %s", self.fallback)
                scope, self.problems = [self.fallback], {}
                self.store.fallback = True

    def _reflector(self, namespace: str | None, scope: list[str] | None) -> Reflector:
        def failed(error: Exception, delay: float) -> None:
            if isinstance(error, ApiException) and error.status == 403 and scope is None:
                raise AllNamespacesForbidden() from error
            if isinstance(error, aiohttp.ClientError | TimeoutError | OSError):
                self.problem(namespace, f"cannot reach the API server: {describe_error(error)}")
            else:
                self.problem(namespace, f"watching TrainingJobs failed: {describe_error(error)}")

        name = f"TrainingJobs in {namespace or 'all namespaces'}"
        mirror = NamespaceMirror(self, namespace, scope)
        return Reflector(self.transport, JOBS.path(namespace), mirror, name, watch_timeout=WATCH_SECONDS,
                         on_failure=failed)  # fmt: skip

    def problem(self, namespace: str | None, problem: str | None) -> None:
        """What keeps `namespace` from being watched (None: nothing); the UI shows the first of any."""
        if problem is None:
            self.problems.pop(namespace, None)
        else:
            self.problems[namespace] = problem
        self.store.set_problem(next(iter(self.problems.values()), None))
