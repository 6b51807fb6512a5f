"""`tj suspend|resume|scale`: change a running TrainingJob's spec in place (spec.suspend, the scale subresource)."""

from __future__ import annotations

from typing import Any

import click

from trainingjob.api import constants as k
from trainingjob.api.status import Phase, job_phase
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.plumbing import connect, connection_options, run


@click.command()
@click.argument("name")
@connection_options
def suspend(target: Target, name: str) -> None:
    """Suspend a job: its workers are deleted; Service, ConfigMap and checkpoints stay (spec.suspend=true)."""
    run(_set_suspend(target, name, True))


@click.command()
@click.argument("name")
@connection_options
def resume(target: Target, name: str) -> None:
    """Resume a suspended job: the workers are created again (spec.suspend=false)."""
    run(_set_suspend(target, name, False))


def refuse_if_finished(job: dict[str, Any], namespace: str, name: str, action: str) -> None:
    """A finished job ignores spec changes (the operator plans nothing but cleanup for it), so suspending, resuming
    or scaling one would report a change that never happens: refuse, and say what does work."""
    phase = job_phase(job) or Phase.PENDING
    if phase in render.FINISHED_PHASES:
        raise CliError(
            f"{k.SINGULAR} {job_ref(namespace, name)} has already {phase.lower()}: a finished job cannot be "
            f"{action}; submit it again (under a new name, or after tj delete) to run it again"
        )


async def _set_suspend(target: Target, name: str, value: bool) -> int:
    word = "suspended" if value else "resumed"
    async with connect(target) as kube:
        refuse_if_finished(await kube.get_job(kube.namespace, name), kube.namespace, name, word)
        await kube.patch_job(kube.namespace, name, {"spec": {"suspend": value}})
    click.echo(f"{k.SINGULAR} {job_ref(kube.namespace, name)} {word}")
    return 0


@click.command()
@click.argument("name")
@click.option("--workers", type=click.IntRange(1, k.MAX_WORKERS), required=True, help="New number of workers.")
@connection_options
def scale(target: Target, name: str, workers: int) -> None:
    """Change the number of workers (scale subresource); a running job restarts its gang with the new size."""
    run(_scale(target, name, workers))


async def _scale(target: Target, name: str, workers: int) -> int:
    async with connect(target) as kube:
        refuse_if_finished(await kube.get_job(kube.namespace, name), kube.namespace, name, "scaled")
        answer = await kube.scale_job(kube.namespace, name, workers)
    replicas = (answer.get("spec") or {}).get("replicas", workers)
    click.echo(f"{k.SINGULAR} {job_ref(kube.namespace, name)} scaled to {replicas} workers")
    return 0
