"""`tj submit`: create TrainingJobs from flags or manifests (YAML files, stdin), or print them (--dry-run).

Everything after the first `--` is the training command, untouched by click. Failures are one `error: …` line and
exit code 1, as for the other job commands (jobs.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref
from trainingjob.cli.manifest import ManifestError, manifest_from_flags, manifests_from_yaml, place
from trainingjob.cli.plumbing import connect, connection_options, output_option, run

TRAINING_COMMAND = "trainingjob.training_command"


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
