"""record_event: a lost Event never fails a reconcile; a refusal is logged at a level that says whether it matters."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.operator.runtime.calls import record_event
from trainingjob.planning.actions import Event

INVOLVED = ("ml.example.com/v1", "TrainingJob", "team", "job", "uid-1")


class RefusingCore:
    """A CoreV1Api whose Event creates the API server refuses with `status` and `body`."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body

    async def create_namespaced_event(self, namespace: str, manifest: dict[str, Any], **_: Any) -> None:
        error = ApiException(status=self.status, reason="Forbidden")
        error.body = json.dumps(self.body)
        raise error


def terminating(namespace: str) -> dict[str, Any]:
    """The body kube-apiserver's NamespaceLifecycle admission answers with."""
    return {
        "kind": "Status",
        "status": "Failure",
        "message": f"unable to create new content in namespace {namespace} because it is being terminated",
        "reason": "Forbidden",
        "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
        "code": 403,
    }


def records(core: RefusingCore, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    with caplog.at_level(logging.DEBUG, logger="trainingjob.operator.runtime.calls"):
        asyncio.run(record_event(core, INVOLVED, Event("Normal", "TrainingSucceeded", "done")))  # type: ignore[arg-type]
    return [r for r in caplog.records if "could not record event" in r.getMessage()]


def test_a_namespace_being_deleted_refusing_an_event_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    [record] = records(RefusingCore(403, terminating("team")), caplog)
    assert record.levelno == logging.DEBUG


def test_any_other_refusal_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    rbac = {"kind": "Status", "reason": "Forbidden", "message": 'User "x" cannot create events', "code": 403}
    [record] = records(RefusingCore(403, rbac), caplog)
    assert record.levelno == logging.WARNING and "TrainingSucceeded on TrainingJob team/job" in record.getMessage()
