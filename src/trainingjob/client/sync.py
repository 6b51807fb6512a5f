"""TrainingClient: the synchronous twin of AsyncTrainingClient, for notebooks and scripts.

It owns an event loop in a daemon thread and runs the async client's coroutines there, so it works where a loop
already runs (a Jupyter kernel runs one, and asyncio.run would refuse) and the local backend's processes stay
supervised between calls. Iterators (logs, watch) pull one item at a time from the loop; the progress display of
`wait` is drawn from the caller's thread, where a notebook expects its output. Ctrl-C (KeyboardInterrupt) cancels
the running call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, Unpack

from trainingjob.api.status import Phase
from trainingjob.client.aio import DEFAULT_TIMEOUT, AsyncTrainingClient, Backend
from trainingjob.client.jobs import Job, Progress
from trainingjob.client.spec import TrainOptions
from trainingjob.client.waiting import Waiter

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread; `run` waits for one coroutine from any other thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="trainingjob-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def iterate(self, iterator: AsyncIterator[T], deadline: float | None = None) -> Iterator[T]:
        """The items of `iterator`, each awaited on the loop; with `deadline` (time.monotonic), TimeoutError when an
        item does not come before it."""
        try:
            while True:
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                try:
                    yield self.run(_next(iterator, remaining))
                except StopAsyncIteration:
                    return
        finally:
            with contextlib.suppress(Exception):
                self.run(_close(iterator), timeout=10)

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


async def _next(iterator: AsyncIterator[T], seconds: float | None) -> T:
    async with asyncio.timeout(seconds):
        return await anext(iterator)


async def _close(iterator: AsyncIterator[Any]) -> None:
    closing = getattr(iterator, "aclose", None)
    if closing is not None:
        await closing()


class TrainingClient:
    """Submit, follow and manage TrainingJobs from Python; see AsyncTrainingClient for what each method does."""

    def __init__(
        self,
        namespace: str | None = None,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        self._loop = LoopThread()
        self._client = self._loop.run(_make(namespace, kubeconfig, context, backend))

    @property
    def namespace(self) -> str:
        return self._client.namespace

    def close(self) -> None:
        """Close the connection (or stop the local backend's processes) and the loop thread."""
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.close()

    def __enter__(self) -> TrainingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def train(self, func: Callable[..., Any] | None = None, **options: Unpack[TrainOptions]) -> str:
        return self._loop.run(self._client.train(func, **options))

    def submit(self, job: Mapping[str, Any] | str | Path) -> str:
        return self._loop.run(self._client.submit(job))

    def get(self, name: str) -> Job:
        return self._loop.run(self._client.get(name))

    def list(self, all_namespaces: bool = False) -> list[Job]:
        return self._loop.run(self._client.list(all_namespaces))

    def progress(self, name: str) -> Progress | None:
        return self._loop.run(self._client.progress(name))

    def watch(self, name: str) -> Iterator[Job]:
        return self._loop.iterate(self._client.watch(name))

    def wait(
        self,
        name: str,
        phase: str | Collection[str] = Phase.SUCCEEDED,
        timeout: float | None = DEFAULT_TIMEOUT,
        show_progress: bool | None = None,
    ) -> Job:
        """As AsyncTrainingClient.wait; the display is drawn from this thread (a notebook's cell output)."""
        with Waiter(name, phase, timeout, show_progress) as waiter:
            for job in self._loop.iterate(self._client.watch(name), waiter.deadline):
                if waiter.see(job):
                    return job
        raise waiter.stopped()

    def logs(self, name: str, worker: int = 0, follow: bool = False) -> Iterator[str]:
        return self._loop.iterate(self._client.logs(name, worker, follow))

    def delete(self, name: str) -> None:
        self._loop.run(self._client.delete(name))

    def suspend(self, name: str) -> Job:
        return self._loop.run(self._client.suspend(name))

    def resume(self, name: str) -> Job:
        return self._loop.run(self._client.resume(name))

    def scale(self, name: str, workers: int) -> Job:
        return self._loop.run(self._client.scale(name, workers))

    # Kubeflow TrainerClient's names ---------------------------------------------------------------------------------

    def get_job(self, name: str) -> Job:
        return self.get(name)

    def list_jobs(self) -> list[Job]:
        return self.list()

    def delete_job(self, name: str) -> None:
        self.delete(name)

    def wait_for_job_status(
        self, name: str, status: Collection[str] = (Phase.SUCCEEDED,), timeout: float = DEFAULT_TIMEOUT
    ) -> Job:
        return self.wait(name, status, timeout)

    def get_job_logs(self, name: str, follow: bool = False, worker: int = 0) -> Iterator[str]:
        return self.logs(name, worker, follow)


async def _make(
    namespace: str | None, kubeconfig: str | None, context: str | None, backend: Backend | None
) -> AsyncTrainingClient:
    """Made on the loop: a local backend's asyncio objects belong to the loop that will run them."""
    return AsyncTrainingClient(namespace, kubeconfig=kubeconfig, context=context, backend=backend)
