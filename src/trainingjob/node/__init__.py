"""A local process node: a kubelet-like agent that runs the pods bound to its node as local processes.

`tj cluster up --local-nodes M` starts one agent per node (`tj-local-0` ...). Where to look: agent.py (wiring,
watches, recovery), config.py + context.py (the node's settings and what every pod worker shares), cleanup.py
(removing pods' local state), and one sub-package per area:
- api/ (API client, informer, Node + Lease + heartbeats, Events),
- pods/ (one pod's lifecycle, container slots, container -> launch spec, pod status, how a pod ends),
- runtime/ (the shim, rootfs and syscalls: the process in its namespaces and cgroups; securityContext),
- network/ (address plan, bridge and netns, sandbox, cluster DNS), volumes/, env/, logs/ (kubectl logs),
- images/ (image -> venv), devices/ (GPUs: discovery, assignment, telemetry), probes/ (startup, liveness,
  readiness).
docs/local-cluster.md has the contract.
"""
