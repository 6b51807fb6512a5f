"""`tj sweep submit|get|describe`: TrainingSweeps (docs/sweeps.md).

Plain text tables, as `tj get` prints them. Parameter values, metric names and messages come from users and from
the trials' reports: control characters are replaced before anything reaches the terminal (an escape sequence in
a categorical value must not repaint someone's screen).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from trainingjob.api import constants as k
from trainingjob.api.sweep_phases import SweepPhase
from trainingjob.cli import render, render_describe
from trainingjob.cli.common import CliError, Target
from trainingjob.cli.manifest import ManifestError, place, yaml_documents
from trainingjob.cli.plumbing import connect, connection_options, not_found, output_option, run

SWEEP_HEADERS = ["NAME", "PHASE", "DONE", "RUNNING", "MAX", "METRIC", "BEST", "BEST TRIAL", "AGE"]
TRIAL_HEADERS = ["TRIAL", "STATE", "VALUE", "EPOCHS", "PARAMETERS", "REASON"]


def printable(value: Any, limit: int = 120) -> str:
    text = render.shown(value if isinstance(value, str) else render.format_number(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@click.group()
def sweep() -> None:
    """Hyperparameter sweeps: TrainingJobs sampled by Optuna, pruned on their per-epoch progress."""


@sweep.command()
@click.option("--filename", "-f", "files", multiple=True, required=True, metavar="FILE", help="TrainingSweep YAML.")
@connection_options
def submit(target: Target, files: tuple[str, ...]) -> None:
    """Create the TrainingSweeps in FILE (kubectl apply -f works as well)."""
    try:
        manifests = [m for path in files for m in sweeps_from_yaml(_read(path), path)]
    except ManifestError as error:
        raise click.ClickException(str(error)) from None
    run(_submit(target, manifests))


def _read(path: str) -> str:
    try:
        return click.get_text_stream("stdin").read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise ManifestError(f"cannot read {path}: {error.strerror or error}") from None


def sweeps_from_yaml(text: str, source: str) -> list[dict[str, Any]]:
    """Every document of a YAML stream, each a TrainingSweep with a name (the API server checks the rest)."""
    documents = yaml_documents(text, source, k.SWEEP_KIND)
    for document in documents:
        if not isinstance(document, dict) or document.get("kind") != k.SWEEP_KIND:
            raise ManifestError(f"{source}: every document must be a {k.SWEEP_KIND} (`tj submit` creates jobs)")
        if not (document.get("metadata") or {}).get("name"):
            raise ManifestError(f"{source}: a {k.SWEEP_KIND} needs metadata.name")
    return documents


async def _submit(target: Target, manifests: list[dict[str, Any]]) -> int:
    async with connect(target) as kube:
        for manifest in manifests:
            try:
                namespace = place(manifest, target.namespace, kube.namespace)
            except ManifestError as error:
                raise CliError(str(error)) from None
            name = manifest["metadata"]["name"]
            with kube.errors(namespace, name, k.SWEEP_PLURAL):
                await kube.custom.create_namespaced_custom_object(
                    k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, manifest
                )
            click.echo(f"{k.SWEEP_SINGULAR} {namespace}/{name} created")
    return 0


@sweep.command()
@click.argument("name", required=False)
@output_option()
@connection_options
def get(target: Target, name: str | None, output: str) -> None:
    """List TrainingSweeps (or show one): phase, trials done and running, the best value so far."""
    run(_get(target, name, output))


async def _get(target: Target, name: str | None, output: str) -> int:
    async with connect(target) as kube:
        sweeps = await _list(kube, kube.namespace, name)
    if name and not sweeps:
        raise not_found(kube.namespace, name)
    if output != "table":
        click.echo(render.dump(sweeps[0] if name else {"items": sweeps}, output))
    elif sweeps:
        now = render.now_utc()
        click.echo(render.format_table(SWEEP_HEADERS, [sweep_row(s, now) for s in sweeps]))
    else:
        click.echo(f"No {k.SWEEP_PLURAL} found in namespace {kube.namespace}.", err=True)
    return 0


async def _list(kube: Any, namespace: str, name: str | None) -> list[dict[str, Any]]:
    selector = {"field_selector": f"metadata.name={name}"} if name else {}
    with kube.errors(namespace, name, k.SWEEP_PLURAL):
        listing = await kube.custom.list_namespaced_custom_object(
            k.GROUP, k.SWEEP_VERSION, namespace, k.SWEEP_PLURAL, **selector
        )
    return sorted(listing.get("items") or [], key=lambda s: s["metadata"]["name"])


def sweep_row(item: dict[str, Any], now: Any) -> list[str]:
    metadata, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    best = status.get("bestTrial") or {}
    return [
        metadata.get("name", ""),
        status.get("phase") or SweepPhase.PENDING.value,
        str(status.get("trialsDone", 0)),
        str(status.get("trialsRunning", 0)),
        str(spec.get("maxTrials", "")),
        printable((spec.get("objective") or {}).get("metric", "")),
        printable(best["value"]) if "value" in best else render.NONE,
        best.get("name") or render.NONE,
        render.age(metadata.get("creationTimestamp"), now),
    ]


@sweep.command()
@click.argument("name")
@output_option()
@connection_options
def describe(target: Target, name: str, output: str) -> None:
    """Show a sweep: its objective, every trial (state, value, epochs, parameters), the best one, conditions and
    recent Events."""
    run(_describe(target, name, output))


async def _describe(target: Target, name: str, output: str) -> int:
    async with connect(target) as kube:
        found = await _list(kube, kube.namespace, name)
        if not found:
            raise not_found(kube.namespace, name)
        events = await kube.job_events(kube.namespace, name, found[0]["metadata"].get("uid"), kind=k.SWEEP_KIND)
    if output != "table":
        click.echo(render.dump({"sweep": found[0], "events": events}, output))
    else:
        click.echo(describe_text(found[0], events[-20:], render.now_utc()))
    return 0


def describe_text(item: dict[str, Any], events: Sequence[dict[str, Any]], now: Any) -> str:
    spec, status = item.get("spec") or {}, item.get("status") or {}
    objective = spec.get("objective") or {}
    goal = f", goal {printable(objective['goal'])}" if "goal" in objective else ""
    lines = [
        f"Name:        {item['metadata']['name']}",
        f"Phase:       {status.get('phase') or 'Pending'}",
        f"Objective:   {objective.get('direction', 'maximize')} {printable(objective.get('metric', ''))}{goal}",
        f"Algorithm:   {printable((spec.get('algorithm') or {}).get('name', 'tpe'))}, pruner "
        f"{printable((spec.get('earlyStopping') or {}).get('pruner', 'none'))}",
        f"Trials:      {status.get('trialsDone', 0)} done, {status.get('trialsRunning', 0)} running, "
        f"{status.get('trialsPruned', 0)} pruned, {status.get('trialsFailed', 0)} failed, max {spec.get('maxTrials')}",
    ]
    best = status.get("bestTrial")
    if best:
        lines.append(f"Best:        {best['name']} = {printable(best['value'])} with {parameters_text(best)}")
    rows = [trial_row(trial) for trial in status.get("trials") or ()]
    if rows:
        lines += ["", "Trials:", render.format_table(TRIAL_HEADERS, rows)]
    conditions = [
        [c.get("type", ""), c.get("status", ""), printable(c.get("reason", "")), printable(c.get("message", ""))]
        for c in status.get("conditions") or ()
    ]
    if conditions:
        lines += ["", "Conditions:", render.format_table(["TYPE", "STATUS", "REASON", "MESSAGE"], conditions)]
    event_rows = [[printable(cell) for cell in row] for row in render_describe.event_rows(events, now)]
    if event_rows:
        lines += ["", "Events:", render.format_table(["TYPE", "REASON", "AGE", "FROM", "MESSAGE"], event_rows)]
    return "\n".join(lines)


def parameters_text(entry: dict[str, Any]) -> str:
    return printable(", ".join(f"{n}={render.format_number(v)}" for n, v in (entry.get("parameters") or {}).items()))


def trial_row(trial: dict[str, Any]) -> list[str]:
    return [
        trial.get("name", ""),
        trial.get("state", ""),
        printable(trial["value"]) if "value" in trial else render.NONE,
        str(trial.get("epochs", render.NONE)),
        parameters_text(trial),
        printable(trial.get("reason", ""), 60),
    ]
