"""`python -m trainingjob.cli` runs the `tj` command."""

from trainingjob.cli import main

main()
