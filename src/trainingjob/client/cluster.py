"""The client's backend for a real cluster: the CLI's client layer (cli/kube.py: kubeconfig, storage-version reads
and writes, the shared watch loop, pod logs), with its failures turned into the client's exceptions.

Code shipped with a job travels in a ConfigMap created just before the job (so the workers never start without
it) and then owned by the job (so the garbage collector deletes it with the job); if the job cannot be created, the
ConfigMap is deleted again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from kubernetes_asyncio import client

from trainingjob.api import constants as k
from trainingjob.api.status import Phase, job_phase
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.kube import Client, load_configuration
from trainingjob.cli.logs import current_pod, no_pod_message
from trainingjob.cli.manifest import place
from trainingjob.client.code import CodePackage
from trainingjob.client.errors import NotFound, TrainingClientError, from_cli_error
from trainingjob.client.spec import code_config_map_name
from trainingjob.kube.phases import PodPhase
from trainingjob.user_agent import PYTHON_CLIENT, named

STARTED_PHASES = (PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED)


@contextlib.contextmanager
def client_errors() -> Iterator[None]:
    """CliErrors of the block raised as the client's exceptions, with the API server's answer kept."""
    try:
        yield
    except CliError as error:
        raise from_cli_error(error) from None


class ClusterBackend:
    """Jobs on the cluster a kubeconfig (or the in-cluster ServiceAccount) points at; connected on first use."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._kube: Client | None = None

    @property
    def namespace(self) -> str:
        """The namespace jobs go to: the one asked for, else the kubeconfig context's (known once connected)."""
        return self._kube.namespace if self._kube is not None else self.target.namespace or ""

    async def kube(self) -> Client:
        if self._kube is None:
            with client_errors():
                configuration, namespace = await load_configuration(self.target)
            self._kube = Client(named(client.ApiClient(configuration=configuration), PYTHON_CLIENT), namespace)
        return self._kube

    async def close(self) -> None:
        if self._kube is not None:
            await self._kube.api.close()
            self._kube = None

    # Jobs ----------------------------------------------------------------------------------------------------------

    async def create(self, manifest: Mapping[str, Any], code: CodePackage | None) -> dict[str, Any]:
        kube = await self.kube()
        body = {**manifest, "metadata": dict(manifest.get("metadata") or {})}
        namespace = body["metadata"]["namespace"] = place(body, None, kube.namespace)
        body["spec"] = dict(body.get("spec") or {})
        with client_errors():
            await kube.frame_from_runtime(namespace, body)  # a runtime's framework, where the job gives none
        if code is None:
            with client_errors():
                return await kube.create_job(namespace, body)
        name = body["metadata"]["name"]
        config_map = code.config_map(code_config_map_name(name), name)
        with client_errors():
            with kube.errors(namespace, config_map["metadata"]["name"], resource="configmaps"):
                await kube.core.create_namespaced_config_map(namespace, config_map)
            try:
                job = await kube.create_job(namespace, body)
            except CliError:
                await self._delete_config_map(kube, namespace, config_map["metadata"]["name"])
                raise
            await self._own(kube, job, config_map["metadata"]["name"])
        return job

    async def _own(self, kube: Client, job: Mapping[str, Any], config_map: str) -> None:
        """Make the job the owner of its code's ConfigMap (no controller, no blockOwnerDeletion: neither is
        needed for garbage collection, and blockOwnerDeletion would need a permission on the job's finalizers)."""
        metadata = job["metadata"]
        owner = {"apiVersion": f"{k.GROUP}/{k.STORAGE_VERSION}", "kind": k.KIND, "name": metadata["name"]}
        patch = {"metadata": {"ownerReferences": [{**owner, "uid": metadata["uid"]}]}}
        with kube.errors(metadata["namespace"], config_map, resource="configmaps"):
            await kube.core.patch_namespaced_config_map(config_map, metadata["namespace"], patch)

    async def _delete_config_map(self, kube: Client, namespace: str, name: str) -> None:
        with contextlib.suppress(CliError), kube.errors(namespace, name, resource="configmaps"):
            await kube.core.delete_namespaced_config_map(name, namespace)

    async def get(self, name: str) -> dict[str, Any]:
        kube = await self.kube()
        with client_errors():
            return await kube.get_job(kube.namespace, name)

    async def list(self, all_namespaces: bool = False) -> list[dict[str, Any]]:
        kube = await self.kube()
        with client_errors():
            listing = await kube.list_jobs(None if all_namespaces else kube.namespace)
        return list(listing.get("items") or [])

    async def delete(self, name: str) -> None:
        kube = await self.kube()
        with client_errors():
            await kube.delete_job(kube.namespace, name)

    async def set_suspend(self, name: str, suspend: bool) -> dict[str, Any]:
        kube = await self.kube()
        with client_errors():
            await kube.patch_job(kube.namespace, name, {"spec": {"suspend": suspend}})
            return await kube.get_job(kube.namespace, name)

    async def scale(self, name: str, workers: int) -> dict[str, Any]:
        kube = await self.kube()
        with client_errors():
            await kube.scale_job(kube.namespace, name, workers)
            return await kube.get_job(kube.namespace, name)

    async def changes(self, name: str) -> AsyncIterator[dict[str, Any]]:
        """The job now, then after each change (the shared watch loop); NotFound once it is deleted."""
        kube = await self.kube()
        namespace = kube.namespace
        with client_errors():
            listing = await kube.list_jobs(namespace, name)
        if not listing.get("items"):
            raise NotFound(f"{k.SINGULAR} {job_ref(namespace, name)} not found", status=404, reason="NotFound")
        yield listing["items"][0]
        with client_errors():
            events = kube.watch_jobs(namespace, listing["metadata"]["resourceVersion"], name)
            async with contextlib.aclosing(events) as stream:
                async for kind, job in stream:
                    if kind == "DELETED":
                        raise NotFound(f"{k.SINGULAR} {job_ref(namespace, name)} was deleted", status=404)
                    yield job

    # Logs ----------------------------------------------------------------------------------------------------------

    async def log_chunks(self, name: str, worker: int, follow: bool) -> AsyncIterator[bytes]:
        """The log of worker `worker`'s trainer container; with `follow`, waits for the worker to start and streams
        until its container ends."""
        kube = await self.kube()
        namespace = kube.namespace
        job = await self._started(name, worker) if follow else await self.get(name)
        with client_errors():
            pods = await kube.worker_pods(namespace, name, worker)
        pod = current_pod(pods)
        if pod is None:
            raise TrainingClientError(no_pod_message(job, namespace, name, worker))
        with client_errors():
            async with contextlib.aclosing(kube.pod_log(namespace, pod["metadata"]["name"], follow)) as chunks:
                async for chunk in chunks:
                    yield chunk

    async def _started(self, name: str, worker: int) -> dict[str, Any]:
        """The job once worker `worker` has started (or the job has finished), as its status tells."""
        async with contextlib.aclosing(self.changes(name)) as jobs:
            async for job in jobs:
                workers = int((job.get("spec") or {}).get("workers", 1))
                if worker >= workers:
                    raise TrainingClientError(f"{k.SINGULAR} {name} has {workers} workers (0 to {workers - 1})")
                status = job.get("status") or {}
                phases = {
                    entry.get("workerId"): entry.get("phase")
                    for entry in status.get("workerStatuses") or []
                    if entry.get("role", k.WORKER) == k.WORKER
                }
                if phases.get(worker) in STARTED_PHASES or (job_phase(job) or Phase.PENDING).finished:
                    return job
        raise NotFound(f"{k.SINGULAR} {name} not found", status=404)
