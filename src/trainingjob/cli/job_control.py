"""`tj suspend|resume|scale`: change a running TrainingJob's spec in place (spec.suspend, the scale subresource)."""

from __future__ import annotations

import click

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import Target, job_ref
from trainingjob.cli.plumbing import connect, connection_options, phase_of, run


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


async def _set_suspend(target: Target, name: str, value: bool) -> int:
    async with connect(target) as kube:
        job = await kube.patch_job(kube.namespace, name, {"spec": {"suspend": value}})
    ref = job_ref(kube.namespace, name)
    word = "suspended" if value else "resumed"
    if phase_of(job) in render.FINISHED_PHASES:
        click.echo(f"{k.SINGULAR} {ref} {word} (it has already {phase_of(job).lower()}; nothing changes)")
    else:
        click.echo(f"{k.SINGULAR} {ref} {word}")
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
        answer = await kube.scale_job(kube.namespace, name, workers)
    replicas = (answer.get("spec") or {}).get("replicas", workers)
    click.echo(f"{k.SINGULAR} {job_ref(kube.namespace, name)} scaled to {replicas} workers")
    return 0
