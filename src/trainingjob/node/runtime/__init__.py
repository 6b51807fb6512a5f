"""The container runtime: one container's process in its namespaces (shim.py, rootfs.py, syscalls.py), the files
the agent and the shim exchange (launch.py), the agent's handle on an attempt (containers.py) and securityContext
(security.py). What containerd and runc are on a real node."""
