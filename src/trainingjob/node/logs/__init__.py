"""`kubectl logs` on the node: the HTTPS endpoint (logserver.py), the CRI log format and query (logquery.py) and
following a log without polling (inotify.py)."""
