"""`tj submit|get|describe|logs|watch|delete|suspend|resume|scale`: manage TrainingJobs.

Every command loads the kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config, else in-cluster), runs one
asyncio.run over kubernetes_asyncio, and reports failures as one `error: …` line with exit code 1 (2 when a
--timeout expires, 130 on Ctrl-C), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.follow import watch
from trainingjob.cli.job_control import resume, scale, suspend
from trainingjob.cli.manifest import ManifestError, manifest_from_flags, manifests_from_yaml, place
from trainingjob.cli.plumbing import (
    TIMEOUT_EXIT,
    connect,
    connection_options,
    not_found,
    output_option,
    print_rich,
    run,
)

if TYPE_CHECKING:
    from trainingjob.cli.kube import Client

TRAINING_COMMAND = "trainingjob.training_command"


# submit --------------------------------------------------------------------------------------------------------------


class SubmitCommand(click.Command):
    """Takes everything after the first `--` as the training command and its arguments, untouched by click."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            index = args.index("--")
            ctx.meta[TRAINING_COMMAND] = args[index + 1 :]
            args = args[:index]
        return super().parse_args(ctx, args)


@click.command(cls=SubmitCommand)
@click.argument("name", required=False)
@click.option(
    "--filename", "-f", "files", multiple=True, metavar="FILE", help="TrainingJob YAML to create ('-': stdin)."
)
@click.option("--framework", type=click.Choice(k.FRAMEWORKS), help="Training framework (flag form).")
@click.option("--image", help="Container image every worker runs (flag form).")
@click.option("--workers", type=click.IntRange(1, k.MAX_WORKERS), default=None, help="Worker pods [default: 1].")
@click.option(
    "--gpus", type=click.IntRange(0, k.MAX_GPUS_PER_WORKER), default=None, help="GPUs per worker [default: 0]."
)
@click.option("--hp", "hyperparameters", multiple=True, metavar="KEY=VALUE", help="Hyperparameter (repeatable).")
@click.option("--env", multiple=True, metavar="NAME=VALUE", help="Environment variable of the workers (repeatable).")
@click.option("--annotation", multiple=True, metavar="KEY=VALUE", help="Annotation of the worker pods (repeatable).")
@click.option("--model", default=None, help="Model name or URI (passed to workers as MODEL).")
@click.option("--dataset", default=None, help="Dataset name or URI (passed to workers as DATASET).")
@click.option("--restart-policy", type=click.Choice(k.RESTART_POLICIES), default=None, help="[default: OnFailure]")
@click.option("--suspend", is_flag=True, help="Create the job suspended (no workers until `tj resume`).")
@click.option(
    "--runtime",
    metavar="NAME",
    default=None,
    help="Start from this runtime (docs/runtimes.md): its image, command, resources, env… unless given here; "
    "--framework defaults to the runtime's.",
)
@click.option(
    "--runtime-kind",
    type=click.Choice(k.RUNTIME_KINDS),
    default=k.CLUSTER_RUNTIME_KIND,
    show_default=True,
    help="A cluster-wide runtime, or one of the job's namespace.",
)
@click.option("--dry-run", is_flag=True, help="Print the manifest instead of creating it (YAML, or -o json).")
@output_option()
@connection_options
def submit(
    target: Target,
    name: str | None,
    files: tuple[str, ...],
    framework: str | None,
    image: str | None,
    workers: int | None,
    gpus: int | None,
    hyperparameters: tuple[str, ...],
    env: tuple[str, ...],
    annotation: tuple[str, ...],
    model: str | None,
    dataset: str | None,
    restart_policy: str | None,
    suspend: bool,
    runtime: str | None,
    runtime_kind: str,
    dry_run: bool,
    output: str,
) -> None:
    """Create TrainingJobs from files, or one from flags.

    \b
      tj submit -f job.yaml [-f more.yaml]
      tj submit NAME --framework pytorch --image IMG --workers 4 --gpus 1 \\
          [--hp lr=0.1 ...] [--env K=V ...] [--annotation K=V ...] -- python train.py --lr 0.1
      tj submit NAME --runtime pytorch-local --workers 2 [--hp epochs=3] [-- COMMAND ...]

    Everything after `--` is the command (first word) and its arguments. --hp values are JSON numbers or booleans
    when they parse as one (0.1, 3, true), else strings ('"3"' forces the string "3"). An existing job is not
    changed: the command says so and exits 1.
    """
    ctx = click.get_current_context()
    command: list[str] = ctx.meta.get(TRAINING_COMMAND, [])
    flags_used = any(
        (name, framework, image, workers, gpus, hyperparameters, env, annotation, model, dataset, restart_policy)
    ) or bool(runtime)
    try:
        if files:
            if flags_used or command or suspend:
                raise click.UsageError("use either -f FILE or NAME with flags, not both")
            manifests = [m for path in files for m in manifests_from_yaml(_read(path), path)]
        else:
            required = (("NAME", name), ("--framework", framework or runtime), ("--image", image or runtime))
            missing = [flag for flag, value in required if not value]
            if missing:
                raise click.UsageError(f"missing {', '.join(missing)} (or give -f FILE, or --runtime)")
            if dry_run and not framework:
                raise click.UsageError("--dry-run with --runtime needs --framework (the runtime is not read)")
            assert name
            manifests = [
                manifest_from_flags(
                    name,
                    framework=framework or "",
                    image=image,
                    runtime=runtime,
                    runtime_kind=runtime_kind,
                    command=command,
                    workers=workers or 1,
                    gpus=gpus or 0,
                    hyperparameters=hyperparameters,
                    env=env,
                    annotations=annotation,
                    model=model,
                    dataset=dataset,
                    restart_policy=restart_policy,
                    suspend=suspend,
                )
            ]
        if dry_run:
            for manifest in manifests:
                if target.namespace:
                    manifest["metadata"]["namespace"] = place(manifest, target.namespace, target.namespace)
            click.echo(_documents(manifests, "json" if output == "json" else "yaml"))
            return
        for manifest in manifests:
            place(manifest, target.namespace, "")  # a -n that contradicts a manifest fails before anything is created
    except ManifestError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)
    run(_submit(target, manifests, output))


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as error:
        raise ManifestError(f"cannot read {path}: {error.strerror or error}") from None


def _documents(documents: Sequence[dict[str, Any]], output: str) -> str:
    if output == "json":
        if len(documents) == 1:
            return render.dump(documents[0], "json")
        return render.dump({"apiVersion": "v1", "kind": "List", "items": list(documents)}, "json")
    return "\n---\n".join(render.dump(document, "yaml") for document in documents)


async def _submit(target: Target, manifests: list[dict[str, Any]], output: str) -> int:
    created, failed = [], 0
    async with connect(target) as kube:
        for manifest in manifests:
            namespace = place(manifest, target.namespace, kube.namespace)
            manifest["metadata"]["namespace"] = namespace
            try:
                await kube.frame_from_runtime(namespace, manifest)
                job = await kube.create_job(namespace, manifest)
            except CliError as error:
                click.echo(f"error: {error}", err=True)
                failed += 1
                continue
            created.append(job)
            if output == "table":
                click.echo(f"{k.SINGULAR} {job_ref(namespace, job['metadata']['name'])} created")
    if created and output != "table":
        click.echo(_documents(created, output))
    return 1 if failed else 0


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
        headers = render.job_headers(all_namespaces)
        rows = [render.job_row(job, now, all_namespaces) for job in jobs]
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
                    row = render.job_row(job, render.now_utc(), all_namespaces)
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
    if output != "table":
        click.echo(render.dump({"job": job, "events": events}, output))
    else:
        print_rich(render.describe(job, events[-20:], render.now_utc()))
    return 0


# logs ----------------------------------------------------------------------------------------------------------------


@click.command()
@click.argument("name")
@click.option("--worker", "worker", type=click.IntRange(0), default=0, show_default=True, help="Worker index (RANK).")
@click.option("--follow", "-f", is_flag=True, help="Keep streaming until the container ends.")
@connection_options
def logs(target: Target, name: str, worker: int, follow: bool) -> None:
    """Print the log of a worker's `trainer` container.

    Pods on local process nodes have real logs; on kwok's fake nodes pods run no containers, so there are none: the
    command says the pod has no logs available and exits 1.
    """
    run(_logs(target, name, worker, follow))


async def _logs(target: Target, name: str, worker: int, follow: bool) -> int:
    async with connect(target) as kube:
        namespace = kube.namespace
        job = await kube.get_job(namespace, name)
        workers = (job.get("spec") or {}).get("workers", 1)
        if worker >= workers:
            raise CliError(f"{k.SINGULAR} {job_ref(namespace, name)} has {workers} workers (0 to {workers - 1})")
        pods = await kube.worker_pods(namespace, name, worker)
        pod = current_pod(pods)
        if pod is None:
            raise CliError(no_pod_message(job, namespace, name, worker))
        stream = sys.stdout.buffer
        async with contextlib.aclosing(kube.pod_log(namespace, pod["metadata"]["name"], follow)) as chunks:
            async for chunk in chunks:
                stream.write(chunk)
                stream.flush()
    return 0


def no_pod_message(job: dict[str, Any], namespace: str, name: str, worker: int) -> str:
    """Why worker `worker` has no log to show: gone with its pod after the job finished, or not created yet."""
    phase = (job.get("status") or {}).get("phase") or "Pending"
    ref = job_ref(namespace, name)
    if phase in render.FINISHED_PHASES:
        return (
            f"worker {worker} of {k.SINGULAR} {ref} is gone: its pod was deleted after the job {phase.lower()}, "
            "and its log went with it"
        )
    return f"{k.SINGULAR} {ref} has no pod for worker {worker} right now (phase {phase})"


def current_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod of the newest attempt, preferring one that is not being deleted."""

    def key(pod: dict[str, Any]) -> tuple[bool, int]:
        metadata = pod.get("metadata") or {}
        attempt = (metadata.get("labels") or {}).get(k.LABEL_ATTEMPT, "0")
        return metadata.get("deletionTimestamp") is None, int(attempt) if attempt.isdigit() else 0

    return max(pods, key=key, default=None)


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
