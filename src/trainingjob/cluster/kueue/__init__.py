"""Kueue as a component of the local cluster (`tj cluster build|up --with-kueue`).

Kueue's manager is built from its pinned module (tools/kueue/go.mod) like the control plane (build.py), installed
from the same version's own manifests (install.py) and run as a process beside the control plane, with its webhooks
and its visibility API addressed at that process the way our operator's webhooks are (settings.py, run.py).
"""
