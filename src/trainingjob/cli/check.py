"""`tj check`: is the operator installed and working, as seen by the API server? What `helm test` runs.

Two checks, each a line: the TrainingJob API is served and you may list jobs (CRD installed, RBAC granting it), and
an operator replica holds the leader Lease and renews it (only the holder reconciles, so a Lease nobody renews
means nothing reconciles even when pods look Running). Both are read through the API server, so the check works
the same from a laptop and from a pod, where no Service address needs to be routed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from trainingjob.api import constants as k
from trainingjob.cli import render
from trainingjob.cli.common import CliError, Target
from trainingjob.cli.plumbing import connect, connection_options, run

if TYPE_CHECKING:
    from trainingjob.cli.kube import Client

POLL_SECONDS = 2.0


def lease_problem(lease: dict[str, Any], now: datetime) -> str | None:
    """Why `lease` shows no working leader (None: a holder renewed it within its duration)."""
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder:
        return "no operator holds it"
    renewed = render.parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds") or 15
    if renewed is None:
        return f"{holder} holds it but never renewed it"
    age = (now - renewed).total_seconds()
    if age > duration:
        return f"{holder} last renewed it {render.human_duration(age)} ago (it expires after {duration}s)"
    return None


@click.command("check")
@click.option("--operator-namespace", default="trainingjob-system", show_default=True, help="The operator's namespace.")
@click.option("--lease", default="trainingjob-operator", show_default=True, help="Name of the operator's Lease.")
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Keep checking this many seconds until both hold (a fresh install elects its leader in a few seconds).",
)
@connection_options
def check(target: Target, operator_namespace: str, lease: str, wait_seconds: float) -> None:
    """Check the installation: TrainingJobs are served (in -n's namespace, else all) and an operator leads.

    Exits 0 when both hold, 1 (with the reason) otherwise.
    """
    run(_check(target, operator_namespace, lease, wait_seconds))


async def _check(target: Target, operator_namespace: str, lease_name: str, wait_seconds: float) -> int:
    deadline = time.monotonic() + wait_seconds
    async with connect(target) as kube:
        while True:
            try:
                lines = await _check_once(kube, target.namespace, operator_namespace, lease_name)
                break
            except CliError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(POLL_SECONDS)
    for line in lines:
        click.echo(f"ok: {line}")
    return 0


async def _check_once(kube: Client, namespace: str | None, operator_namespace: str, lease_name: str) -> list[str]:
    """Both checks once: their lines, or the CliError of the first that fails."""
    from kubernetes_asyncio import client

    listing = await kube.list_jobs(namespace)
    where = f"namespace {namespace}" if namespace else "all namespaces"
    with kube.errors(operator_namespace, lease_name, resource="leases"):
        coordination = client.CoordinationV1Api(kube.api)
        lease = kube.api.sanitize_for_serialization(
            await coordination.read_namespaced_lease(lease_name, operator_namespace)
        )
    problem = lease_problem(lease, render.now_utc())
    if problem:
        raise CliError(f"lease {operator_namespace}/{lease_name}: {problem}")
    return [
        f"{k.PLURAL}.{k.GROUP} served; {len(listing.get('items') or [])} job(s) in {where}",
        f"operator {lease['spec']['holderIdentity']} leads (lease {operator_namespace}/{lease_name})",
    ]
