"""`tj watch`: follow a job live until it finishes (exit 0 Succeeded, 1 Failed, 2 on --timeout)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import click
from rich.console import RenderableType
from rich.progress import BarColumn, Progress, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from trainingjob.api import constants as k
from trainingjob.api.readouts import phase_shown
from trainingjob.api.status import Phase, job_phase
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.plumbing import (
    TIMEOUT_EXIT,
    connect,
    connection_options,
    get_existing,
    run,
    stdout_console,
)
from trainingjob.cli.queue_view import key_of, read_places
from trainingjob.queueing.visibility import QueuePlace, position_text, waiting

PLACE_SECONDS = 10.0

# watch ---------------------------------------------------------------------------------------------------------------


@click.command()
@click.argument("name")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Give up after SECONDS.")
@connection_options
def watch(target: Target, name: str, timeout: float | None) -> None:
    """Follow a job live (phase, running workers, progress) until it finishes.

    Exits 0 when it Succeeded, 1 when it Failed (with the reason) or was deleted, 2 when --timeout expires.
    """
    run(_watch(target, name, timeout))


class _ReportedBar(BarColumn):
    """The bar, except for a finished job that never reported progress: neither a pulse (nothing is happening)
    nor a full bar (nobody measured 100 %); the summary's "done" says it."""

    def render(self, task: Task) -> RenderableType:
        return Text("") if task.fields.get("no_bar") else super().render(task)


class _Display:
    """A rich progress bar on a terminal; elsewhere one line per change."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.last = ""
        self.tty = sys.stdout.isatty()
        self.progress = Progress(
            SpinnerColumn(finished_text="•"),
            TextColumn("[bold]{task.fields[ref]}"),
            _ReportedBar(),
            TextColumn("{task.fields[summary]}", markup=False),  # a message's "[/x]" is text, not markup
            TimeElapsedColumn(),
            console=stdout_console(),
            disable=not self.tty,
        )
        self.task = self.progress.add_task("", total=None, ref=ref, summary="", no_bar=False)

    def __enter__(self) -> _Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def show(self, job: dict[str, Any], place: QueuePlace | None = None) -> None:
        view = render.progress_view(job)
        if place is not None and waiting(job):
            view = render.ProgressView(view.percent, " · ".join([view.summary, *queue_parts(place)]))
        if self.tty:
            self.progress.update(
                self.task,
                total=None if view.percent is None else 100,
                completed=view.percent or 0,
                summary=render.shown(view.summary),
                no_bar=view.percent is None and job_phase(job) in render.FINISHED_PHASES,
            )
        elif view.summary != self.last:
            click.echo(f"{self.ref}: {render.shown(view.summary)}")
        self.last = view.summary


async def _watch(target: Target, name: str, limit: float | None) -> int:
    async with connect(target) as kube:
        namespace = kube.namespace
        ref = job_ref(namespace, name)
        job, version = await get_existing(kube, namespace, name)
        with _Display(ref) as display:
            latest = {"job": job}
            display.show(job, await _place(kube, job))
            refresher = asyncio.create_task(_refresh_place(kube, display, latest))
            try:
                async with asyncio.timeout(limit):
                    if job_phase(job) not in render.FINISHED_PHASES:
                        async with contextlib.aclosing(kube.watch_jobs(namespace, version, name)) as events:
                            async for kind, job in events:
                                if kind == "DELETED":
                                    raise CliError(f"{k.SINGULAR} {ref} was deleted")
                                latest["job"] = job
                                display.show(job, await _place(kube, job))
                                if job_phase(job) in render.FINISHED_PHASES:
                                    break
            except TimeoutError:
                phase = phase_shown(job)
                raise CliError(
                    f"timed out after {limit:g}s waiting for {k.SINGULAR} {ref} to finish (phase {phase})",
                    exit_code=TIMEOUT_EXIT,
                ) from None
            finally:
                refresher.cancel()
    if job_phase(job) is Phase.FAILED:
        raise CliError(f"{k.SINGULAR} {ref} failed: {render.failure_message(job)}")
    click.echo(f"{k.SINGULAR} {ref} succeeded")
    return 0


async def _place(kube: Any, job: dict[str, Any]) -> QueuePlace | None:
    """The job's place in Kueue's queues while it waits (None otherwise: nothing is read)."""
    if not waiting(job):
        return None
    now = render.now_utc()
    return (await read_places(kube.api, [job], now)).get(key_of(job))


async def _refresh_place(kube: Any, display: _Display, latest: dict[str, Any]) -> None:
    """While the job waits, its position is read again every PLACE_SECONDS: it moves as other jobs are admitted,
    which changes nothing in this job's object, so its watch says nothing of it."""
    while True:
        await asyncio.sleep(PLACE_SECONDS)
        job = latest["job"]
        if waiting(job):
            display.show(job, await _place(kube, job))


def queue_parts(place: QueuePlace) -> list[str]:
    parts = [f"position {text}"] if (text := position_text(place)) else []
    if place.waited_seconds is not None:
        parts.append(f"queued {render.human_duration(place.waited_seconds)}")
    return parts
