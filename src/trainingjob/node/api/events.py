"""Events about pods, as the kubelet records them (Pulled, Created, Started, Killing, Failed, BackOff, ...).

Best effort and never blocking a pod: each event is sent in the background, and a failure is only logged.
Repeats of the same reason and message for the same object within a pod's life are sent once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from trainingjob.node.api.client import Api
from trainingjob.node.api.registration import now

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, api: Api, node: str) -> None:
        self.api = api
        self.node = node
        self._sent: set[tuple[str, str, str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def forget(self, uid: str) -> None:
        self._sent = {key for key in self._sent if key[0] != uid}

    def pod_event(
        self, pod: dict[str, Any], reason: str, message: str, warning: bool = False, container: str | None = None
    ) -> None:
        metadata = pod["metadata"]
        key = (metadata["uid"], reason, message, container or "")
        if key in self._sent:
            return
        self._sent.add(key)
        involved: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": metadata["namespace"],
            "name": metadata["name"],
            "uid": metadata["uid"],
        }
        if container:
            involved["fieldPath"] = f"spec.containers{{{container}}}"
        stamp = now()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{metadata['name']}.{uuid.uuid4().hex[:16]}", "namespace": metadata["namespace"]},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": "kubelet", "host": self.node},
            "reportingComponent": "kubelet",
            "reportingInstance": self.node,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        task = asyncio.get_running_loop().create_task(self._send(metadata["namespace"], event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, namespace: str, event: dict[str, Any]) -> None:
        try:
            await self.api.create(f"/api/v1/namespaces/{namespace}/events", event)
        except Exception as error:
            log.debug("event %s not recorded: %s", event["reason"], error)
