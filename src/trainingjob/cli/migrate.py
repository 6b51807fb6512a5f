"""`tj migrate-storage`: move every TrainingJob to the CRD's storage version (cli/storage_migration.py)."""

from __future__ import annotations

import click

from trainingjob.api import constants as k
from trainingjob.cli.common import CliError, Target
from trainingjob.cli.plumbing import run


@click.command("migrate-storage")
@click.option("--kubeconfig", metavar="PATH", default=None, help="Kubeconfig file (default: $KUBECONFIG, ...).")
@click.option("--context", default=None, help="Kubeconfig context to use (default: its current-context).")
@click.option("--dry-run", is_flag=True, help="Count the TrainingJobs that would be rewritten; change nothing.")
def migrate_storage_command(kubeconfig: str | None, context: str | None, dry_run: bool) -> None:
    """Rewrite every TrainingJob (all namespaces) in the CRD's storage version, then record that only it is stored.

    Needs the operator running (its webhook converts jobs still stored in an older version) and rights to update
    every TrainingJob and the CRD's status. Safe to interrupt and to run again: jobs are written back unchanged,
    so nothing restarts."""

    async def main() -> int:
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        from trainingjob.cli.kube import load_configuration
        from trainingjob.cli.storage_migration import migrate_storage
        from trainingjob.user_agent import CLI, named

        configuration, _ = await load_configuration(Target(kubeconfig, context, None))
        async with named(client.ApiClient(configuration=configuration), CLI) as api:
            try:
                migration = await migrate_storage(api, dry_run)
            except ApiException as error:
                raise CliError(f"storage migration failed: {error.status} {error.reason}") from None
        verb = "would rewrite" if dry_run else "rewrote"
        click.echo(f"{verb} {migration.rewritten} TrainingJob(s) in {k.GROUP}/{migration.storage_version}")
        if migration.gone:
            click.echo(f"{migration.gone} were deleted meanwhile")
        for failure in migration.failed:
            click.echo(f"error: {failure}", err=True)
        click.echo(f"status.storedVersions: {migration.stored_before} -> {migration.stored_after}")
        return 1 if migration.failed else 0

    run(main())
