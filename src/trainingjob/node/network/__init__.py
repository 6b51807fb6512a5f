"""The pod network: the address plan (netplan.py), bridge and per-pod network namespaces through iproute2
(iproute.py), the pod sandbox (sandbox.py) and the cluster DNS the node serves (dns.py, dnswire.py)."""
