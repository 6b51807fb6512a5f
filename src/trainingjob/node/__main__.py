"""`python -m trainingjob.node --config <file>`: run one node agent (started by `tj cluster up`)."""

from trainingjob.node.agent import main

main()
