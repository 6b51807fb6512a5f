"""The `tj` command: one entry point for the local cluster, the operator and (later) job management."""

from __future__ import annotations

# First, before any command module imports kubernetes_asyncio: its ~850 generated classes load on first use
# (kube/lazy_client.py), ~25 MiB less for `tj operator` and about half a second less for every `tj` command. Installed
# here and not in `operator()`, because importing the commands below already imports the client (cli/jobs.py ->
# queueing/visibility.py), which had silently made the operator's own later install a no-op.
from trainingjob.kube.lazy_client import install as load_client_classes_lazily

load_client_classes_lazily()

import click  # noqa: E402

from trainingjob import __version__  # noqa: E402
from trainingjob.cli.check import check  # noqa: E402
from trainingjob.cli.cluster import cluster  # noqa: E402
from trainingjob.cli.jobs import COMMANDS as JOB_COMMANDS  # noqa: E402
from trainingjob.cli.migrate import migrate_storage_command  # noqa: E402
from trainingjob.cli.operator import operator  # noqa: E402
from trainingjob.cli.sweeps import sweep  # noqa: E402
from trainingjob.cli.ui import ui  # noqa: E402


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
