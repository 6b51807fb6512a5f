"""The `tj` command: one entry point for the local cluster, the operator and (later) job management."""

from __future__ import annotations

import click

from trainingjob import __version__
from trainingjob.cli.check import check
from trainingjob.cli.cluster import cluster
from trainingjob.cli.jobs import COMMANDS as JOB_COMMANDS
from trainingjob.cli.migrate import migrate_storage_command
from trainingjob.cli.operator import operator
from trainingjob.cli.sweeps import sweep
from trainingjob.cli.ui import ui


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tj")
def main() -> None:
    """trainingjob-operator: distributed ML training on Kubernetes."""


main.add_command(cluster)
main.add_command(operator)
main.add_command(migrate_storage_command)
main.add_command(ui)
main.add_command(check)
main.add_command(sweep)
for job_command in JOB_COMMANDS:
    main.add_command(job_command)
