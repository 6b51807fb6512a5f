"""Plumbing shared by the `tj` job commands: options, the async runner, output and error helpers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref

if TYPE_CHECKING:
    from trainingjob.cli.kube import Client


TIMEOUT_EXIT = 2
INTERRUPTED_EXIT = 130


# Plumbing ------------------------------------------------------------------------------------------------------------


def run(main: Coroutine[Any, Any, int | None]) -> None:
    """Run one command's coroutine; exit with its code, or report a CliError as one line."""
    try:
        code = asyncio.run(main)
    except CliError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED_EXIT)
    sys.exit(code or 0)


def connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig, --context and -n/--namespace, handed to the command as one `target`."""

    @functools.wraps(command)
    def wrapper(*args: Any, kubeconfig: str | None, context: str | None, namespace: str | None, **kwargs: Any) -> Any:
        return command(*args, target=Target(kubeconfig, context, namespace), **kwargs)

    options = [
        click.option(
            "--kubeconfig",
            metavar="PATH",
            default=None,
            help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster account).",
        ),
        click.option("--context", default=None, help="Kubeconfig context to use (default: its current-context)."),
        click.option(
            "--namespace",
            "-n",
            default=None,
            help="Namespace (default: the namespace of the kubeconfig context, else 'default').",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def output_option(default: str = "table") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--output",
        "-o",
        type=click.Choice(render.OUTPUTS),
        default=default,
        show_default=True,
        help="Output format.",
    )


def connect(target: Target) -> contextlib.AbstractAsyncContextManager[Client]:
    """A Client for `target`; the Kubernetes client library is loaded only by commands that talk to a cluster."""
    from trainingjob.cli.kube import Client

    return Client.connect(target)


def stdout_console() -> Console:
    """Rich output on stdout: the terminal's width on a terminal, wide plain text in pipes and files."""
    tty = sys.stdout.isatty()
    return Console(highlight=False, soft_wrap=False, width=None if tty else 160, force_terminal=None)


def print_rich(renderable: Any) -> None:
    """Print with rich: styled on a terminal; plain, with no trailing blanks, in pipes and files."""
    console = stdout_console()
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def not_found(namespace: str | None, name: str) -> CliError:
    return CliError(f"{k.SINGULAR} {job_ref(namespace, name)} not found")


async def get_existing(kube: Client, namespace: str, name: str) -> tuple[dict[str, Any], str]:
    """Job `name` and the resourceVersion to watch it from; CliError when it does not exist."""
    listing = await kube.list_jobs(namespace, name)
    if not listing.get("items"):
        raise not_found(namespace, name)
    return listing["items"][0], listing["metadata"]["resourceVersion"]


def phase_of(job: dict[str, Any]) -> str:
    return (job.get("status") or {}).get("phase") or "Pending"
