"""`tj migrate-storage` gives up on a job that keeps conflicting, and says what the API server said."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.cli.storage_migration import RETRIES, Migration, _rewrite

JOB = {"metadata": {"namespace": "ns", "name": "lab", "resourceVersion": "7"}}
MESSAGE = 'Operation cannot be fulfilled on trainingjobs.ml.example.com "lab": the object has been modified'


class AlwaysConflicting:
    """A writer always ahead of us: every replace fails 409, every read returns the job again."""

    def __init__(self) -> None:
        self.replaces = 0

    async def replace_namespaced_custom_object(self, *args: Any) -> None:
        self.replaces += 1
        error = ApiException(status=409, reason="Conflict")
        error.body = json.dumps({"kind": "Status", "message": MESSAGE})
        raise error

    async def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        return JOB


def test_a_job_that_keeps_conflicting_fails_with_the_servers_words() -> None:
    custom, migration = AlwaysConflicting(), Migration("v1", ["v1alpha1", "v1"], ["v1alpha1", "v1"])
    asyncio.run(_rewrite(custom, JOB, "v1", migration))  # type: ignore[arg-type]
    assert custom.replaces == RETRIES and migration.rewritten == 0
    assert migration.failed == [f"ns/lab: still conflicting after {RETRIES} attempts ({MESSAGE})"]
