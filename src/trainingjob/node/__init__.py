"""A local process node: a kubelet-like agent that runs the pods bound to its node as local processes.

`tj cluster up --local-nodes M` starts one agent per node (`tj-local-0` ...). Where to look:
registration.py (Node, Lease, heartbeats), informer.py + agent.py (watches, recovery), podworker.py (one pod's
lifecycle), starter.py (container -> launch spec), shim.py + rootfs.py (the process in its namespaces),
sandbox.py + network.py + netplan.py (pod network), volumes.py + payload.py (volumes), envvars.py +
expansion.py + fieldpath.py (env), status.py (pod status), logserver.py + logquery.py (kubectl logs), dns.py +
dnswire.py (cluster DNS), images.py + runtimes.py (image -> venv). docs/local-cluster.md has the contract.
"""
