"""When a wait is over: the phases asked for, what a job's phase means for them, and the one Waiter both clients'
`wait` loops use (the async one over `async for`, the sync one over its loop thread's iterator)."""

from __future__ import annotations

import time
from collections.abc import Collection
from types import TracebackType

from trainingjob.api import constants as k
from trainingjob.api.status import Phase
from trainingjob.client.display import progress_display
from trainingjob.client.errors import JobFailed, TrainingClientError, WaitTimeout
from trainingjob.client.jobs import Job


def wanted_phases(phase: str | Collection[str]) -> tuple[str, ...]:
    """The phases to wait for, checked against the ones a TrainingJob has."""
    phases = (phase,) if isinstance(phase, str) else tuple(phase)
    unknown = [name for name in phases if name not in k.PHASES]
    if not phases or unknown:
        raise ValueError(f"wait for one of {', '.join(k.PHASES)}; got {', '.join(unknown) or 'nothing'}")
    return phases


def settled(job: Job, wanted: tuple[str, ...]) -> bool:
    """Whether `job` is in a wanted phase; a job that finished otherwise ends the wait with an exception."""
    if job.phase in wanted:
        return True
    if job.phase == Phase.FAILED:
        raise JobFailed(f"{job.name} failed: {job.failure}", job)
    if job.finished:
        raise TrainingClientError(f"{job.name} ended {job.phase} without being {' or '.join(wanted)}")
    return False


class Waiter:
    """One wait: shows each state of the job, says when it is settled, and turns a TimeoutError inside its block
    into WaitTimeout with the last phase seen."""

    def __init__(self, name: str, phase: str | Collection[str], timeout: float | None, show: bool | None) -> None:
        self.name = name
        self.wanted = wanted_phases(phase)
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.display = progress_display(show)
        self.last: Job | None = None

    def see(self, job: Job) -> bool:
        self.display.show(job)
        self.last = job
        return settled(job, self.wanted)

    def stopped(self) -> TrainingClientError:
        return TrainingClientError(f"stopped watching {self.name} before it was {' or '.join(self.wanted)}")

    def __enter__(self) -> Waiter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.display.close()
        if kind is not None and issubclass(kind, TimeoutError) and not isinstance(error, WaitTimeout):
            seen = f" (phase {self.last.phase})" if self.last else ""
            message = f"{self.name} was not {' or '.join(self.wanted)} after {self.timeout:g}s{seen}"
            raise WaitTimeout(message, self.last) from None
