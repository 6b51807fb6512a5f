"""`tj get|describe|watch|delete|suspend|resume|scale` (and submit.py's `tj submit`, logs.py's `tj logs`): manage
TrainingJobs.

Every command loads the kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config, else in-cluster), runs one
asyncio.run over kubernetes_asyncio, and reports failures as one `error: …` line with exit code 1 (2 when a
--timeout expires, 130 on Ctrl-C), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import click

from trainingjob.api import constants as k
from trainingjob.cli import queue_view, render, render_describe
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.follow import watch
from trainingjob.cli.job_control import resume, scale, suspend
from trainingjob.cli.logs import logs
from trainingjob.cli.plumbing import (
    TIMEOUT_EXIT,
    connect,
    connection_options,
    not_found,
    output_option,
    print_rich,
    run,
)
from trainingjob.cli.submit import submit

if TYPE_CHECKING:
    from trainingjob.cli.kube import Client

# get -----------------------------------------------------------------------------------------------------------------


@click.command()
@click.argument("name", required=False)
@click.option("--all-namespaces", "-A", is_flag=True, help="List the jobs of every namespace.")
@click.option("--watch", "-w", is_flag=True, help="After listing, print each change (watch API) until Ctrl-C.")
@output_option()
@connection_options
def get(target: Target, name: str | None, all_namespaces: bool, watch: bool, output: str) -> None:
    """List TrainingJobs (or show one): NAME, FRAMEWORK, WORKERS, PHASE, RESTARTS, AGE."""
    if all_namespaces and target.namespace:
        raise click.UsageError("use either --namespace or --all-namespaces")
    run(_get(target, name, all_namespaces, watch, output))


async def _get(target: Target, name: str | None, all_namespaces: bool, watch: bool, output: str) -> int:
    async with connect(target) as kube:
        namespace = None if all_namespaces else kube.namespace
        listing = await kube.list_jobs(namespace, name)
        jobs = sorted(listing.get("items") or [], key=_job_key)
        if name and not jobs:
            raise not_found(namespace, name)
        now = render.now_utc()
        queued = output == "table" and queue_view.queued_listing(jobs)
        places = await queue_view.read_places(kube.api, jobs, now) if queued else {}
        headers = queue_view.table_headers(all_namespaces, queued)
        rows = [queue_view.table_row(job, now, all_namespaces, queued, places) for job in jobs]
        widths = render.column_widths(headers, rows)
        if output != "table":
            document = jobs[0] if name and not all_namespaces else listing | {"items": jobs}
            click.echo(render.dump(document, output))
        elif jobs or watch:
            click.echo(render.format_table(headers, rows) if jobs else render.format_row(headers, widths))
        else:
            where = "any namespace" if all_namespaces else f"namespace {namespace}"
            click.echo(f"No {k.PLURAL} found in {where}.", err=True)
        if not watch:
            return 0
        version = listing["metadata"]["resourceVersion"]
        printed = {_job_key(job): row[:-1] for job, row in zip(jobs, rows, strict=True)}
        async with contextlib.aclosing(kube.watch_jobs(namespace, version, name)) as events:
            async for _kind, job in events:
                if output == "table":
                    # Print a line when a column changed, not for every write (finalizers, conditions' times, …).
                    now = render.now_utc()
                    if queued and queue_view.queue_of(job):
                        places.update(await queue_view.read_places(kube.api, [job], now))
                    row = queue_view.table_row(job, now, all_namespaces, queued, places)
                    key, shown = _job_key(job), row[:-1]  # AGE aside
                    if printed.get(key) != shown:
                        printed[key] = shown
                        click.echo(render.format_row(row, widths))
                else:
                    click.echo(("---\n" if output == "yaml" else "") + render.dump(job, output))
    return 0


def _job_key(job: dict[str, Any]) -> tuple[str, str]:
    metadata = job.get("metadata") or {}
    return metadata.get("namespace", ""), metadata.get("name", "")


# describe ------------------------------------------------------------------------------------------------------------


@click.command()
@click.argument("name")
@output_option()
@connection_options
def describe(target: Target, name: str, output: str) -> None:
    """Show a job: spec summary, status counters, conditions, workers and its recent Events.

    -o json|yaml prints {"job": <the TrainingJob>, "events": [<its Events>]}.
    """
    run(_describe(target, name, output))


async def _describe(target: Target, name: str, output: str) -> int:
    async with connect(target) as kube:
        job = await kube.get_job(kube.namespace, name)
        events = await kube.job_events(kube.namespace, name, job["metadata"].get("uid"))
        now = render.now_utc()
        place = (await queue_view.read_places(kube.api, [job], now)).get(_job_key(job))
    if output != "table":
        click.echo(render.dump({"job": job, "events": events}, output))
    else:
        print_rich(render_describe.describe(job, events[-20:], now, queue_view.describe_rows(job, place, now)))
    return 0


# delete, suspend, resume, scale --------------------------------------------------------------------------------------


@click.command()
@click.argument("name")
@click.option(
    "--wait",
    is_flag=True,
    help="Wait until the job and its workers are gone (they get spec.terminationGracePeriodSeconds to stop).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=120,
    show_default=True,
    help="With --wait: give up after SECONDS (exit 2).",
)
@connection_options
def delete(target: Target, name: str, wait: bool, timeout: float) -> None:
    """Delete a job; the operator removes its workers, garbage collection the rest."""
    run(_delete(target, name, wait, timeout))


async def _delete(target: Target, name: str, wait: bool, limit: float) -> int:
    async with connect(target) as kube:
        namespace = kube.namespace
        ref = job_ref(namespace, name)
        answer = await kube.delete_job(namespace, name)
        pending = answer.get("kind") == k.KIND and (answer.get("metadata") or {}).get("finalizers")
        if pending and not wait:
            click.echo(f"{k.SINGULAR} {ref} marked for deletion (its workers are removed first; --wait waits)")
            return 0
        if wait:
            uid = str((answer.get("metadata") or {}).get("uid") or "")
            try:
                async with asyncio.timeout(limit):
                    await _gone(kube, namespace, name)
                    await _workers_gone(kube, namespace, name, uid)
            except TimeoutError:
                raise CliError(f"timed out after {limit:g}s waiting for {ref} to be deleted", TIMEOUT_EXIT) from None
    click.echo(f"{k.SINGULAR} {ref} deleted")
    return 0


async def _workers_gone(kube: Client, namespace: str, name: str, job_uid: str) -> None:
    """Until no pod of the deleted job is left, Terminating ones included: the job object goes first (its
    finalizer only asks for the deletes), while the workers take up to their grace period to stop and save. A
    job submitted again under the name meanwhile would find the names taken (Blocked, PodNameTaken)."""
    if job_uid:
        await kube.wait_job_pods_gone(namespace, name, job_uid)


async def _gone(kube: Client, namespace: str, name: str) -> None:
    listing = await kube.list_jobs(namespace, name)
    if not listing.get("items"):
        return
    async with contextlib.aclosing(kube.watch_jobs(namespace, listing["metadata"]["resourceVersion"], name)) as events:
        async for kind, _job in events:
            if kind == "DELETED":
                return


COMMANDS = (submit, get, describe, logs, watch, delete, suspend, resume, scale)
