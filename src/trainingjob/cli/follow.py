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
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.plumbing import (
    TIMEOUT_EXIT,
    connect,
    connection_options,
    get_existing,
    phase_of,
    run,
    stdout_console,
)

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
            TextColumn("{task.fields[summary]}"),
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

    def show(self, job: dict[str, Any]) -> None:
        view = render.progress_view(job)
        if self.tty:
            self.progress.update(
                self.task,
                total=None if view.percent is None else 100,
                completed=view.percent or 0,
                summary=view.summary,
                no_bar=view.percent is None and phase_of(job) in render.FINISHED_PHASES,
            )
        elif view.summary != self.last:
            click.echo(f"{self.ref}: {view.summary}")
        self.last = view.summary


async def _watch(target: Target, name: str, limit: float | None) -> int:
    async with connect(target) as kube:
        namespace = kube.namespace
        ref = job_ref(namespace, name)
        job, version = await get_existing(kube, namespace, name)
        with _Display(ref) as display:
            display.show(job)
            try:
                async with asyncio.timeout(limit):
                    if phase_of(job) not in render.FINISHED_PHASES:
                        async with contextlib.aclosing(kube.watch_jobs(namespace, version, name)) as events:
                            async for kind, job in events:
                                if kind == "DELETED":
                                    raise CliError(f"{k.SINGULAR} {ref} was deleted")
                                display.show(job)
                                if phase_of(job) in render.FINISHED_PHASES:
                                    break
            except TimeoutError:
                raise CliError(
                    f"timed out after {limit:g}s waiting for {k.SINGULAR} {ref} to finish (phase {phase_of(job)})",
                    exit_code=TIMEOUT_EXIT,
                ) from None
    if phase_of(job) == "Failed":
        raise CliError(f"{k.SINGULAR} {ref} failed: {render.failure_message(job)}")
    click.echo(f"{k.SINGULAR} {ref} succeeded")
    return 0
