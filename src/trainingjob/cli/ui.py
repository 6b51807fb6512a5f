"""`tj ui`: serve the web UI on this machine, acting with the caller's kubeconfig (docs/ui.md)."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from pathlib import Path
from urllib.parse import quote

import click

from trainingjob.cli.common import CliError, Target
from trainingjob.cli.plumbing import run
from trainingjob.paths import cache_root

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def allowed_hosts(address: str, port: int, extra: tuple[str, ...]) -> set[str]:
    """Host header values the server answers to (anything else may be a DNS-rebinding page)."""
    names = {address, *LOOPBACK} if address in LOOPBACK or address in ("0.0.0.0", "::") else {address}
    hosts = {f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names if n not in ("0.0.0.0", "::")}
    return hosts | set(extra)


def history_directory(explicit: str | None, server: str) -> Path | None:
    if explicit == "":
        return None
    if explicit:
        return Path(explicit).expanduser()
    return cache_root() / "ui" / "history" / hashlib.sha256(server.encode()).hexdigest()[:16]


async def serve(
    target: Target, address: str, port: int, token: str, history_dir: str | None, hosts: tuple[str, ...]
) -> int:
    from aiohttp import web
    from kubernetes_asyncio import client

    from trainingjob.cli.kube import load_configuration
    from trainingjob.ui.history import History
    from trainingjob.ui.server import build_app, missing_assets
    from trainingjob.ui.store import JobStore
    from trainingjob.user_agent import UI, named

    missing = missing_assets()
    if missing:
        raise CliError(f"the UI's browser libraries are not installed ({', '.join(missing)}): run `make ui-assets`")
    configuration, namespace = await load_configuration(target)
    async with named(client.ApiClient(configuration=configuration), UI) as api:
        directory = history_directory(history_dir, configuration.host)
        settings = {
            "token": token,
            "hosts": allowed_hosts(address, port, hosts),
            "namespace": namespace,
            "namespaces": [target.namespace] if target.namespace else None,
            "server": configuration.host,
            "user": "",
        }
        app = build_app(api, settings, JobStore(History(directory)))
        runner = web.AppRunner(app, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, address, port)
            try:
                await site.start()
            except OSError as error:
                raise CliError(f"cannot listen on {address}:{port}: {error.strerror or error}") from None
            shown = f"[{address}]" if ":" in address else address
            click.echo(f"tj ui: serving {configuration.host} as your kubeconfig's user", err=True)
            click.echo(f"open http://{shown}:{port}/#token={quote(token, safe='')}", err=True)
            if directory is not None:
                click.echo(f"progress history: {directory}", err=True)
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
    return 0


@click.command("ui")
@click.option("--kubeconfig", metavar="PATH", default=None, help="Kubeconfig file (default: $KUBECONFIG, ...).")
@click.option("--context", default=None, help="Kubeconfig context to use (default: its current-context).")
@click.option(
    "--namespace",
    "-n",
    default=None,
    help="Show only this namespace (default: every namespace you may list, else the context's namespace).",
)
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8099, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--token",
    envvar="TJ_UI_TOKEN",
    default=None,
    help="Access token for the browser (default: a random one, printed in the URL).",
)
@click.option(
    "--history-dir",
    default=None,
    help="Where progress curves are kept across restarts (default: ~/.cache/trainingjob/ui/history/<server>; "
    "'' keeps them in memory only).",
)
@click.option("--allow-host", "hosts", multiple=True, help="Another Host header to accept (e.g. behind a proxy).")
def ui(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    address: str,
    port: int,
    token: str | None,
    history_dir: str | None,
    hosts: tuple[str, ...],
) -> None:
    """Serve the web UI: live job list, job pages with curves, events and logs, and actions.

    Every call to the API server is made with your kubeconfig's credentials: the UI can do exactly what
    `kubectl` can do for you, nothing more. Only the holder of the printed URL's token may use it.
    """
    if address not in LOOPBACK:
        click.echo(f"warning: listening on {address}: whoever reaches it with the token acts as you", err=True)
    target = Target(kubeconfig, context, namespace)
    run(serve(target, address, port, token or secrets.token_urlsafe(24), history_dir, hosts))
