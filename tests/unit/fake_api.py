"""Just enough of an API server to unit-test the apply layer and the reconciler's bookkeeping without one.

It keeps the semantics those depend on: JSON merge patches (RFC 7386), the resourceVersion precondition, a patch
that changes nothing leaving the resourceVersion as it was (the real server sends no watch event then), and status
written in the watched version's shape while the jobs it holds are in the internal one.
Everything else about the API (validation, defaults, graceful deletion) belongs in tests/integration.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.api.conversion import convert_status, status_in
from trainingjob.api.versions import SHAPES
from trainingjob.builders.endpoints import slice_view
from trainingjob.builders.service import ServiceView, service_ports, service_view
from trainingjob.operator.runtime.writer import Writer
from trainingjob.operator.trainingjob.apply import Applier
from trainingjob.reconcile.observed import pod_view


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes a key, anything else replaces the target."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Answer:
    """What a core/v1 write gives with `_preload_content=False`: a status and a body nobody parses."""

    status = 201

    async def read(self) -> bytes:
        return b"{}"


ANSWER = Answer()


class FakeApiServer:
    """One namespace's TrainingJobs and pods; the CustomObjectsApi and CoreV1Api methods the Applier calls."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.events: list[str] = []
        self.status_patches: list[dict[str, Any]] = []
        # A status (as stored, in the watched version) the real server's schema would refuse: a message makes
        # the patch fail with 422 (Invalid).
        self.invalid_status: Callable[[Mapping[str, Any]], str | None] = lambda status: None
        self.failing_deletes: set[str] = set()
        self.services: dict[str, ServiceView] = {}
        self.endpoint_slices: dict[str, dict[str, Any]] = {}
        self.config_maps: dict[str, dict[str, str]] = {}
        self.version = 100

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def add_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        job = copy.deepcopy(dict(body))
        job["metadata"]["resourceVersion"] = self.next_version()
        self.jobs[job["metadata"]["name"]] = job
        return copy.deepcopy(job)

    def add_pod(self, body: Mapping[str, Any]) -> None:
        pod = copy.deepcopy(dict(body))
        pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}-{self.next_version()}")
        self.pods[pod["metadata"]["name"]] = pod

    def indexes(self, namespace: str) -> dict[str, Any]:
        """What the informers' indexes would hold once every watch event has arrived."""
        pods: dict[tuple[str, str], list[Any]] = {}
        for pod in self.pods.values():
            job = pod["metadata"]["labels"]["ml.example.com/job-name"]
            pods.setdefault((namespace, job), []).append(pod_view(pod))
        return {
            "trainingjob_bodies": {(namespace, name): [copy.deepcopy(job)] for name, job in self.jobs.items()},
            "worker_pods": pods,
            "worker_services": {(namespace, _job_of(name)): [ports] for name, ports in self.services.items()},
            "job_config_maps": {(namespace, _job_of(name)): [data] for name, data in self.config_maps.items()},
            "job_claims": {},
            "job_endpoint_slices": {
                (namespace, body["metadata"]["labels"]["ml.example.com/job-name"]): [slice_view(body)]
                for body in self.endpoint_slices.values()
            },
        }

    def _patch_job(self, name: str, patch: Mapping[str, Any], part: str | None) -> dict[str, Any]:
        job = self.jobs.get(name)
        if job is None:
            raise ApiException(status=404, reason="Not Found")
        expected = (patch.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != job["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        if part == "status":
            # Stored in the watched version: the patch applies to the status in that shape, and the operator's
            # caches see the result converted back, as handlers.py converts every watched body.
            stored = merge_patch(status_in(job.get("status") or {}, k.WATCHED_VERSION), patch.get("status") or {})
            if (problem := self.invalid_status(stored)) is not None:
                raise ApiException(status=422, reason=problem)
            changed = {**job, "status": convert_status(stored, SHAPES[k.WATCHED_VERSION], SHAPES[k.INTERNAL_VERSION])}
        else:
            changed = merge_patch(job, {key: value for key, value in patch.items() if key != "status"})
            changed["metadata"]["resourceVersion"] = job["metadata"]["resourceVersion"]
        if changed != job:  # the real server does not write (nor bump the version of) an unchanged object
            changed["metadata"]["resourceVersion"] = self.next_version()
            self.jobs[name] = changed
        return copy.deepcopy(self.jobs[name])

    # CustomObjectsApi
    async def patch_namespaced_custom_object_status(self, group, version, namespace, plural, name, body, **_: Any):
        self.status_patches.append(copy.deepcopy(body))
        return self._patch_job(name, body, "status")

    async def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body, **_: Any):
        return self._patch_job(name, body, None)

    async def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **_: Any):
        self.jobs.pop(name, None)

    # CoreV1Api
    async def create_namespaced_event(self, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        self.events.append(body["reason"])
        return ANSWER

    async def delete_namespaced_pod(self, name: str, namespace: str, body: Any = None, **_: Any) -> Answer:
        if name in self.failing_deletes:
            raise ApiException(status=500, reason="Internal Server Error")
        if name not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        del self.pods[name]
        return ANSWER

    async def create_namespaced_pod(self, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        if body["metadata"]["name"] in self.pods:
            raise ApiException(status=409, reason="AlreadyExists")
        self.add_pod(body)
        return ANSWER

    async def create_namespaced_service(self, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        self.services[body["metadata"]["name"]] = service_view(body)
        return ANSWER

    async def patch_namespaced_service(self, name: str, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        if name not in self.services:
            raise ApiException(status=404, reason="Not Found")
        self.services[name] = ServiceView(service_ports(body["spec"].get("ports")), self.services[name].selects_pods)
        return ANSWER

    # DiscoveryV1Api
    async def create_namespaced_endpoint_slice(self, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        if body["metadata"]["name"] in self.endpoint_slices:
            raise ApiException(status=409, reason="AlreadyExists")
        self.endpoint_slices[body["metadata"]["name"]] = copy.deepcopy(dict(body))
        return ANSWER

    async def patch_namespaced_endpoint_slice(
        self, name: str, namespace: str, body: Mapping[str, Any], **_: Any
    ) -> Answer:
        if name not in self.endpoint_slices:
            raise ApiException(status=404, reason="Not Found")
        self.endpoint_slices[name] = merge_patch(self.endpoint_slices[name], body)
        return ANSWER

    async def create_namespaced_config_map(self, namespace: str, body: Mapping[str, Any], **_: Any) -> Answer:
        self.config_maps[body["metadata"]["name"]] = dict(body.get("data") or {})
        return ANSWER

    async def replace_namespaced_config_map(
        self, name: str, namespace: str, body: Mapping[str, Any], **_: Any
    ) -> Answer:
        self.config_maps[name] = dict(body.get("data") or {})
        return ANSWER

    async def create_namespaced_persistent_volume_claim(
        self, namespace: str, body: Mapping[str, Any], **_: Any
    ) -> Answer:
        return ANSWER


def _job_of(child_name: str) -> str:
    """`<job>-workers` and `<job>-config` belong to `<job>`."""
    return child_name.rsplit("-", 1)[0]


def fake_applier(server: FakeApiServer, count_status_patch: Callable[[Iterable[str]], None] | None = None) -> Applier:
    writer = Writer(None, max_concurrent_writes=4, core=server, custom=server, discovery=server)
    return Applier(writer, count_status_patch)
