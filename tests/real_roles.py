"""Helpers for the multi-role and elastic tests that run real frameworks on the local process nodes
(tests/integration/test_roles_*.py): the job's status and the pods' logs, read back through the API server.

Bounds are generous on purpose: a loaded 2-core machine starts several interpreters importing a framework at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.jobs import get_job, job_pods
from tests.kube import Kube, wait_until

RUN_TIMEOUT = 600


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return (get_job(kube, namespace, name) or {}).get("status") or {}


def log_of(kube: Kube, namespace: str, pod: str) -> str:
    """The trainer container's log of `pod` (the node's log endpoint, through the API server); "" before it ran."""
    try:
        response = kube.core.read_namespaced_pod_log(pod, namespace, container="trainer", _preload_content=False)
    except Exception:  # not started yet, or gone
        return ""
    return response.data.decode(errors="replace")


def log_tails(kube: Kube, namespace: str, job: str, lines: int = 20) -> str:
    """The end of every pod's log, for a failure message: why a real run went wrong is in there."""
    tails = []
    for pod in job_pods(kube, namespace, job):
        log = log_of(kube, namespace, pod.metadata.name) or "(no log)"
        tails.append(f"--- {pod.metadata.name} ---\n" + "\n".join(log.splitlines()[-lines:]))
    return "\n".join(tails)


def wait_status(
    kube: Kube,
    namespace: str,
    name: str,
    check: Callable[[dict[str, Any]], Any],
    what: str,
    timeout: float = RUN_TIMEOUT,
    interval: float = 1.0,
) -> dict[str, Any]:
    """The job's status once `check(status)` holds (polled every `interval` s); the last status and every pod's
    log tail otherwise."""
    last: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        nonlocal last
        last = status_of(kube, namespace, name)
        if last.get("phase") == "Failed" and "Failed" not in what:
            raise AssertionError(f"{namespace}/{name} Failed while waiting for {what}")
        return last if check(last) else None

    try:
        return wait_until(reached, timeout, f"{namespace}/{name}: {what}", interval=interval)
    except AssertionError as error:
        detail = f"{error}; last status: {json.dumps(last, indent=1)}\n{log_tails(kube, namespace, name)}"
        raise AssertionError(detail) from None
