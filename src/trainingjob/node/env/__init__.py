"""A container's environment: sources in the kubelet's order (envvars.py), `$(VAR)` expansion (expansion.py), the
downward API (fieldpath.py) and service variables (serviceenv.py)."""
