"""Plumbing shared by the `tj` job commands: options, the async runner, output and error helpers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target, job_ref, one_line

if TYPE_CHECKING:
    from trainingjob.cli.kube import Client


TIMEOUT_EXIT = 2
INTERRUPTED_EXIT = 130
# What an interrupted command gets to close its connections before the process ends regardless.
INTERRUPT_GRACE_SECONDS = 5.0


# Plumbing ------------------------------------------------------------------------------------------------------------


def run(main: Coroutine[Any, Any, int | None]) -> None:
    """Run one command's coroutine; exit with its code, or report a CliError as one line."""
    try:
        code = asyncio.run(_interruptible(main))
    except CliError as error:
        click.echo(f"error: {one_line(str(error))}", err=True)
        sys.exit(error.exit_code)
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit(INTERRUPTED_EXIT)
    sys.exit(code or 0)


async def _interruptible(main: Coroutine[Any, Any, int | None]) -> int | None:
    """`main`, cancelled by Ctrl-C (SIGINT), which also arms a hard exit.

    Cancelling lets the command close its connections, but a cleanup that hangs, or a library that swallows the
    cancellation, would keep the command alive after Ctrl-C (a fresh-clone CI run once saw `tj get -w` outlive its
    SIGINT by 30 s, not reproduced since): so the process ends INTERRUPT_GRACE_SECONDS later whatever it is doing.
    """
    loop, task = asyncio.get_running_loop(), asyncio.current_task()

    def interrupted() -> None:
        _exit_after(INTERRUPT_GRACE_SECONDS)
        if task is not None:
            task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not in the main thread: no handler
        loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        return await main
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)


def _exit_after(seconds: float) -> None:
    """End the process with INTERRUPTED_EXIT in `seconds` unless it has ended by then (a daemon thread dies with it)."""

    def hard_exit() -> None:
        # os.write, not sys.stderr: the main thread may hold the stream's lock wherever it hangs.
        os.write(2, f"interrupted: cleanup did not finish within {seconds:g} s, exiting\n".encode())
        os._exit(INTERRUPTED_EXIT)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()


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
