"""AsyncTrainingClient: the client's one implementation (the synchronous TrainingClient runs it on a loop of its
own). Shaped after Kubeflow's TrainerClient (`train`, `wait_for_job_status`, `get_job_logs`, `list_jobs`, …) where
that fits, with the short names beside them.

A backend does the work: ClusterBackend (a real cluster through the kubeconfig) or LocalBackend (processes of this
machine). Everything above it — building the job, shipping the code, waiting, showing progress, reading logs as
lines — is written once here, so both behave alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Protocol, Unpack

from trainingjob.api.status import Phase
from trainingjob.cli.common import Target
from trainingjob.client.cluster import ClusterBackend
from trainingjob.client.code import CodePackage
from trainingjob.client.jobs import Job, Progress
from trainingjob.client.manifests import one_manifest
from trainingjob.client.spec import TrainOptions, train_request
from trainingjob.client.waiting import Waiter

DEFAULT_TIMEOUT = 600.0


class Backend(Protocol):
    """Where jobs run: each method takes and returns TrainingJob bodies in the internal shape."""

    @property
    def namespace(self) -> str: ...

    async def create(self, manifest: Mapping[str, Any], code: CodePackage | None) -> dict[str, Any]: ...

    async def get(self, name: str) -> dict[str, Any]: ...

    async def list(self, all_namespaces: bool = False) -> list[dict[str, Any]]: ...

    async def delete(self, name: str) -> None: ...

    async def set_suspend(self, name: str, suspend: bool) -> dict[str, Any]: ...

    async def scale(self, name: str, workers: int) -> dict[str, Any]: ...

    def changes(self, name: str) -> AsyncIterator[dict[str, Any]]: ...

    def log_chunks(self, name: str, worker: int, follow: bool) -> AsyncIterator[bytes]: ...

    async def close(self) -> None: ...


class AsyncTrainingClient:
    """Submit, follow and manage TrainingJobs from Python (asyncio).

    `namespace`, `kubeconfig` and `context` choose the cluster as `tj` does (--kubeconfig, $KUBECONFIG,
    ~/.kube/config, else in-cluster); `backend=LocalBackend()` runs jobs as local processes instead.
    """

    def __init__(
        self,
        namespace: str | None = None,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.backend: Backend = backend or ClusterBackend(Target(kubeconfig, context, namespace))

    @property
    def namespace(self) -> str:
        return self.backend.namespace

    async def close(self) -> None:
        await self.backend.close()

    async def __aenter__(self) -> AsyncTrainingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # Submitting ----------------------------------------------------------------------------------------------------

    async def train(self, func: Callable[..., Any] | None = None, **options: Unpack[TrainOptions]) -> str:
        """Run `func(**func_args)` (or `script=` with `args=`) on `workers=` workers; the new job's name.

        The code is shipped with the job (no image build): the function's source must import what it uses. Each
        worker gets the framework's environment (RANK, WORLD_SIZE, MASTER_ADDR, …), CHECKPOINT_DIR and a progress
        endpoint for `trainingjob.sdk.report_progress`. The options are TrainOptions' (client/spec.py).
        """
        manifest, code = train_request(func, options)
        created = await self.backend.create(manifest, code)
        return str(created["metadata"]["name"])

    async def submit(self, job: Mapping[str, Any] | str | Path) -> str:
        """Create a TrainingJob from its manifest: a dict in the API's shape (either served version), YAML text,
        or the path of a YAML file holding one TrainingJob; its name."""
        created = await self.backend.create(one_manifest(job), None)
        return str(created["metadata"]["name"])

    # Reading -------------------------------------------------------------------------------------------------------

    async def get(self, name: str) -> Job:
        return Job.from_body(await self.backend.get(name))

    async def list(self, all_namespaces: bool = False) -> list[Job]:
        jobs = [Job.from_body(body) for body in await self.backend.list(all_namespaces)]
        return sorted(jobs, key=lambda job: (job.namespace, job.name))

    async def progress(self, name: str) -> Progress | None:
        """What the chief reported last (None before its first report)."""
        return (await self.get(name)).progress

    async def watch(self, name: str) -> AsyncIterator[Job]:
        """The job now, then after every change, until the caller stops (NotFound once it is deleted)."""
        async with contextlib.aclosing(self.backend.changes(name)) as changes:
            async for body in changes:
                yield Job.from_body(body)

    async def wait(
        self,
        name: str,
        phase: str | Collection[str] = Phase.SUCCEEDED,
        timeout: float | None = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (Kubeflow's and the sync twin's signature)
        show_progress: bool | None = None,
    ) -> Job:
        """The job once it is in `phase` (one or several), showing its progress live in a notebook.

        Raises JobFailed if it fails while another phase is awaited, WaitTimeout after `timeout` seconds (None:
        no limit), NotFound if it is deleted.
        """
        with Waiter(name, phase, timeout, show_progress) as waiter:
            async with asyncio.timeout(timeout):
                async for job in self.watch(name):
                    if waiter.see(job):
                        return job
        raise waiter.stopped()

    async def logs(self, name: str, worker: int = 0, follow: bool = False) -> AsyncIterator[str]:
        """Worker `worker`'s output, line by line (decoded as UTF-8, undecodable bytes replaced); with `follow`,
        from when the worker starts until it ends."""
        pending = b""
        async with contextlib.aclosing(self.backend.log_chunks(name, worker, follow)) as chunks:
            async for chunk in chunks:
                *complete, pending = (pending + chunk).split(b"\n")
                for line in complete:
                    yield line.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")

    # Changing ------------------------------------------------------------------------------------------------------

    async def delete(self, name: str) -> None:
        """Delete the job; the operator removes its workers, the garbage collector its other children."""
        await self.backend.delete(name)

    async def suspend(self, name: str) -> Job:
        return Job.from_body(await self.backend.set_suspend(name, True))

    async def resume(self, name: str) -> Job:
        return Job.from_body(await self.backend.set_suspend(name, False))

    async def scale(self, name: str, workers: int) -> Job:
        """Change the number of workers (the scale subresource): a running gang restarts with the new size."""
        return Job.from_body(await self.backend.scale(name, workers))

    # Kubeflow TrainerClient's names ---------------------------------------------------------------------------------

    async def get_job(self, name: str) -> Job:
        return await self.get(name)

    async def list_jobs(self) -> list[Job]:
        return await self.list()

    async def delete_job(self, name: str) -> None:
        await self.delete(name)

    async def wait_for_job_status(
        self,
        name: str,
        status: Collection[str] = (Phase.SUCCEEDED,),
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (Kubeflow's signature)
    ) -> Job:
        return await self.wait(name, status, timeout)

    def get_job_logs(self, name: str, follow: bool = False, worker: int = 0) -> AsyncIterator[str]:
        return self.logs(name, worker, follow)
